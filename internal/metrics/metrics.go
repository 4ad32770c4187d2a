// Package metrics holds the relay's Prometheus metrics (outbox_relay_*) and
// serves them with the health and readiness endpoints.
package metrics

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Roles of a relay instance (outbox_relay_role).
const (
	RoleStreaming = "streaming"
	RoleStandby   = "standby"
	RolePolling   = "polling"
	RoleStarting  = "starting"
)

var roles = []string{RoleStarting, RoleStreaming, RoleStandby, RolePolling}

// Topic label values that stand for many topics: whoever writes
// outbox.events chooses the topics, and each label value is a series kept
// for the life of the process. No topic has these names (Kafka allows no
// parentheses in one).
const (
	// TopicRefused counts events never sent to a topic that has no value of
	// its own: invalid events and those refused before sending (a name
	// Kafka does not allow, --topics, a topic Kafka does not have).
	TopicRefused = "(refused)"
	// TopicOther counts events of topics beyond the cap (LimitTopics).
	TopicOther = "(other)"
)

// MaxTopicsDefault is how many topics get a label value of their own.
const MaxTopicsDefault = 1000

// Metrics are the relay's collectors, registered on their own registry.
type Metrics struct {
	reg *prometheus.Registry

	published *prometheus.CounterVec // topic
	sent      *prometheus.CounterVec // topic
	retried   *prometheus.CounterVec // topic
	failed    *prometheus.CounterVec // topic, reason
	mapped    *prometheus.CounterVec // table, outcome

	CommitToAck  prometheus.Histogram
	AckToDurable prometheus.Histogram
	Statement    *prometheus.HistogramVec // statement

	SlotLag       prometheus.Gauge
	ConfirmedLSN  prometheus.Gauge
	InFlight      prometheus.Gauge
	InFlightBytes prometheus.Gauge

	breaker            *prometheus.GaugeVec   // state
	breakerTransitions *prometheus.CounterVec // to

	// DeadLettered counts failures published on the dead-letter topic, by
	// original topic and outcome (sent, or refused by the topic).
	DeadLettered *prometheus.CounterVec // topic, outcome

	Claimed          prometheus.Counter
	Rescued          prometheus.Counter
	GapSwept         prometheus.Counter
	Backfilled       prometheus.Counter
	RetentionDeleted prometheus.Counter
	Queued           prometheus.Counter
	Spilling         prometheus.Gauge
	QueuedKeys       prometheus.Gauge

	Pending          prometheus.Gauge
	OldestPendingAge prometheus.Gauge
	Failed           prometheus.Gauge

	role *prometheus.GaugeVec // role

	catalog []Doc // every outbox_relay_* metric, in the order New makes them

	progress atomic.Pointer[func() Progress] // read by the progress gauges at each scrape

	mu     sync.Mutex
	topics map[string]*topicCounters // by label value
	// named is how many topics have a label value of their own, at most
	// maxTopics.
	named, maxTopics int
}

// topicCounters are one topic's outcome counters, looked up once.
type topicCounters struct {
	label                    string // the topic, TopicRefused or TopicOther
	published, sent, retried prometheus.Counter
	failed                   map[string]prometheus.Counter // reason
}

// New makes the metrics of a relay of the given version.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), topics: map[string]*topicCounters{}, maxTopics: MaxTopicsDefault}
	f := factory{reg: m.reg, docs: &m.catalog}
	m.published = f.counterVec("events_published_total", "Events handed to Kafka, once per attempt.", "topic")
	m.sent = f.counterVec("events_sent_total", "Events acknowledged by Kafka and recorded SENT.", "topic")
	m.retried = f.counterVec("events_retried_total", "Failed delivery attempts left PENDING for a retry with backoff.", "topic")
	m.failed = f.counterVec("events_failed_total", "Events recorded FAILED, by failure_reason.", "topic", "reason")
	m.mapped = f.counterVec("mapped_events_total", "Events of mapped tables (--tables-config, --debezium-config) by table and "+
		"outcome: published, sent, retried, failed, queued (outbox.events is counted by topic alone).", "table", "outcome")
	m.CommitToAck = f.histogram("commit_to_ack_seconds", "From the event's commit (pgoutput) to Kafka's acknowledgement, streamed events.",
		prometheus.ExponentialBuckets(0.0005, 2, 18))
	m.AckToDurable = f.histogram("ack_to_durable_seconds", "From the earliest Kafka acknowledgement of a group of events to their status rows being durable.",
		prometheus.ExponentialBuckets(0.001, 2, 16))
	m.Statement = f.histogramVec("status_statement_duration_seconds", "Duration of the relay's status statements: insert_outcomes, record_outcomes, barrier.",
		prometheus.ExponentialBuckets(0.0005, 2, 16), "statement")
	m.SlotLag = f.gauge("slot_lag_bytes", "WAL the slot has not confirmed: the server's WAL end minus confirmed_flush_lsn.")
	m.ConfirmedLSN = f.gauge("slot_confirmed_lsn", "The LSN this relay last confirmed on the slot, as a number.")
	m.InFlight = f.gauge("in_flight_events", "Events read from the slot without a status row yet.")
	m.InFlightBytes = f.gauge("in_flight_bytes", "Bytes of those events.")
	m.breaker = f.gaugeVec("kafka_breaker_state", "1 for the Kafka circuit breaker's current state (closed, half-open, open).", "state")
	m.breakerTransitions = f.counterVec("kafka_breaker_transitions_total", "Circuit breaker transitions, by the state entered.", "to")
	m.Claimed = f.counter("poller_claimed_total", "Rows the poller claimed for delivery.")
	m.DeadLettered = f.counterVec("events_dead_lettered_total", "FAILED events published on the dead-letter topic "+
		"(--dead-letter-topic), by their original topic; outcome sent, or refused (the topic refused it: the row's dead_letter_error says why). "+
		"Topics never sent to count as "+TopicRefused+", those past --metrics-max-topics as "+TopicOther+".",
		"topic", "outcome")
	m.Rescued = f.counter("poller_rescued_total", "Rows stuck in PROCESSING that the poller took back.")
	m.GapSwept = f.counter("gap_swept_total", "Events without a status row that the gap sweep gave a row (PENDING, or in poll mode, where it delivers them, their outcome).")
	m.Backfilled = f.counter("backfilled_total", "Events committed before a new slot that its backfill gave a status row (SENT, or PENDING behind their key).")
	m.RetentionDeleted = f.counter("retention_deleted_total", "SENT events deleted by --retention.")
	m.Queued = f.counter("events_queued_total", "Events the stream queued as PENDING rows for the poller instead of publishing: "+
		"during a spill, or behind an earlier event of their key.")
	m.Spilling = f.gauge("spilling", "1 while the stream queues every event (a spill: Kafka down for --spill-after, or too many queued keys).")
	m.QueuedKeys = f.gauge("queued_keys", "Keys whose new events the stream queues behind earlier ones.")
	m.Pending = f.gauge("pending_events", "PENDING rows (read at most every 10s, from their index).")
	m.OldestPendingAge = f.gauge("oldest_pending_age_seconds", "How long the most overdue PENDING row has been due (read at most every 10s).")
	m.Failed = f.gauge("failed_events", "FAILED rows (read at most every 10s, from their index).")
	f.gaugeFunc("replication_silence_seconds",
		"Seconds since the last message from PostgreSQL on the replication connection (0 while not streaming). "+
			"The relay asks for a reply after a quarter of --replication-timeout and reconnects at all of it.",
		func() float64 { return m.readProgress().Silence.Seconds() })
	f.gaugeFunc("stalled_seconds",
		"Seconds since the last streamed event got its status row, while events are in flight (0 when none is).",
		func() float64 { return m.readProgress().Stalled.Seconds() })
	f.gaugeFunc("slot_held_back",
		"1 while PostgreSQL holds the slot's changes back until a standby named in synchronized_standby_slots confirms them (PostgreSQL 17 and newer).",
		func() float64 { return boolFloat(m.readProgress().HeldBack) })
	m.role = f.gaugeVec("role", "1 for this instance's role: starting, streaming, standby or polling.", "role")
	f.gaugeVec("build_info", "Build information; always 1.", "version", "go_version").WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.SetRole(RoleStarting)
	m.SetBreaker("closed")
	return m
}

// Progress is how long the stream has gone without news: Silence since the
// server's last message, Stalled since events in flight last made progress;
// HeldBack while the server holds the slot back for a standby.
type Progress struct {
	Silence, Stalled time.Duration
	HeldBack         bool
}

// WatchProgress has the progress gauges call read at each scrape.
func (m *Metrics) WatchProgress(read func() Progress) { m.progress.Store(&read) }

func (m *Metrics) readProgress() Progress {
	if f := m.progress.Load(); f != nil {
		return (*f)()
	}
	return Progress{}
}

// Registry is where the metrics are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetRole sets outbox_relay_role.
func (m *Metrics) SetRole(role string) {
	for _, r := range roles {
		m.role.WithLabelValues(r).Set(boolFloat(r == role))
	}
}

// SetBreaker records the circuit breaker entering state.
func (m *Metrics) SetBreaker(state string) {
	for _, s := range []string{"closed", "half-open", "open"} {
		m.breaker.WithLabelValues(s).Set(boolFloat(s == state))
	}
}

// BreakerTransition counts the breaker entering state.
func (m *Metrics) BreakerTransition(state string) {
	m.SetBreaker(state)
	m.breakerTransitions.WithLabelValues(state).Inc()
}

// Observe times a status statement.
func (m *Metrics) Observe(statement string, start time.Time) {
	m.Statement.WithLabelValues(statement).Observe(time.Since(start).Seconds())
}

// LimitTopics sets how many topics get a label value of their own
// (--metrics-max-topics); 0 or less: MaxTopicsDefault. Set it before
// counting.
func (m *Metrics) LimitTopics(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maxTopics = MaxTopicsDefault
	if n > 0 {
		m.maxTopics = n
	}
}

// DeadLetter counts a dead letter of an event for topic with outcome (sent
// or refused); refused: the event was never sent to its topic.
func (m *Metrics) DeadLetter(topic string, refused bool, outcome string) {
	m.mu.Lock()
	label := m.label(topic, refused)
	m.mu.Unlock()
	m.DeadLettered.WithLabelValues(label, outcome).Inc()
}

// topic is the counters of topic's label value.
func (m *Metrics) topic(name string, refused bool) *topicCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counters(m.label(name, refused))
}

// label is the label value of topic: its own name once it has one; else
// TopicRefused for an event never sent to it (refused), its own name while
// fewer than maxTopics topics have one, TopicOther past that. Called with
// m.mu held.
func (m *Metrics) label(topic string, refused bool) string {
	switch _, ok := m.topics[topic]; {
	case ok:
		return topic
	case refused:
		return TopicRefused
	case m.named >= m.maxTopics:
		return TopicOther
	}
	m.named++
	m.counters(topic)
	return topic
}

// counters is the counters of a label value, made at its first use.
// Called with m.mu held.
func (m *Metrics) counters(label string) *topicCounters {
	c := m.topics[label]
	if c == nil {
		c = &topicCounters{label: label, published: m.published.WithLabelValues(label), sent: m.sent.WithLabelValues(label),
			retried: m.retried.WithLabelValues(label), failed: map[string]prometheus.Counter{}}
		m.topics[label] = c
	}
	return c
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Doc describes one of the relay's metrics for the metrics reference
// (docs/operating.md).
type Doc struct {
	Name   string // outbox_relay_events_sent_total
	Type   string // counter, gauge or histogram
	Labels []string
	Help   string
}

// Catalog lists the relay's own metrics (outbox_relay_*), in the order
// they are made. The Go runtime's and the process's come besides.
func Catalog() []Doc { return slices.Clone(New("").catalog) }

// factory makes collectors named outbox_relay_<name> on one registry,
// and lists each in docs.
type factory struct {
	reg  *prometheus.Registry
	docs *[]Doc
}

// doc lists a metric.
func (f factory) doc(kind, name, help string, labels ...string) {
	*f.docs = append(*f.docs, Doc{Name: "outbox_relay_" + name, Type: kind, Labels: labels, Help: help})
}

// register registers c and returns it.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	reg.MustRegister(c)
	return c
}

func (f factory) opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: "outbox", Subsystem: "relay", Name: name, Help: help}
}

func (f factory) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	o := f.opts(name, help)
	return prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: buckets}
}

func (f factory) counter(name, help string) prometheus.Counter {
	f.doc("counter", name, help)
	return register(f.reg, prometheus.NewCounter(prometheus.CounterOpts(f.opts(name, help))))
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	f.doc("counter", name, help, labels...)
	return register(f.reg, prometheus.NewCounterVec(prometheus.CounterOpts(f.opts(name, help)), labels))
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	f.doc("gauge", name, help)
	return register(f.reg, prometheus.NewGauge(prometheus.GaugeOpts(f.opts(name, help))))
}

func (f factory) gaugeFunc(name, help string, read func() float64) {
	f.doc("gauge", name, help)
	register(f.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts(f.opts(name, help)), read))
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	f.doc("gauge", name, help, labels...)
	return register(f.reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(f.opts(name, help)), labels))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	f.doc("histogram", name, help)
	return register(f.reg, prometheus.NewHistogram(f.histogramOpts(name, help, buckets)))
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	f.doc("histogram", name, help, labels...)
	return register(f.reg, prometheus.NewHistogramVec(f.histogramOpts(name, help, buckets), labels))
}
