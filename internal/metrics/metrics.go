// Package metrics holds the relay's Prometheus metrics (outbox_relay_*) and
// serves them with the health and readiness endpoints.
package metrics

import (
	"runtime"
	"slices"
	"strings"
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

	slotLag       *prometheus.GaugeVec // slot
	ConfirmedLSN  prometheus.Gauge
	InFlight      prometheus.Gauge
	InFlightBytes prometheus.Gauge

	breaker            *prometheus.GaugeVec   // state
	breakerTransitions *prometheus.CounterVec // to

	deadLettered *prometheus.CounterVec // topic, outcome

	Claimed          prometheus.Counter
	Rescued          prometheus.Counter
	GapSwept         prometheus.Counter
	GapSweepBehind   prometheus.Gauge
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
	ready    atomic.Pointer[func() error]    // read by outbox_relay_ready at each scrape

	mu     sync.Mutex
	topics map[string]*labelCounters // by label value: a topic, TopicRefused or TopicOther
	// named is how many topics have a label value of their own, at most
	// maxTopics.
	named, maxTopics int
	tables           map[string]*labelCounters // mapped table
	parked           map[parkedKey]float64     // counts of labels no scrape has shown yet
	scrapes          uint64                    // scrapes begun
	shown            uint64                    // the latest scrape served: labels made before it began were shown at 0
	deadLetters      bool                      // dead-letter counters are made with each topic's
	outcomes         OutcomeSink               // told SENT and FAILED counts at each Tally's Flush; nil: none
}

// labelCounters are the counters of one topic or mapped table, made at 0
// together the first time it is seen. Counts wait (parked) until a scrape
// has shown them at 0: Prometheus's rate() and increase() do not count a
// series' first sample, so a new topic's first events would never show.
type labelCounters struct {
	born     uint64                        // scrapes begun when they were made
	counters map[string]prometheus.Counter // outcome, or outcome/reason
}

type parkedKey struct {
	table bool // a mapped table, not a topic
	label string
	name  string // the counter's key in labelCounters.counters
}

// Failure reasons (outbox.deliveries.failure_reason) whose counters each
// topic has from the moment it is first seen (internal/kafka's and
// internal/store's; a test checks they are all here).
var FailureReasons = []string{"INVALID_TOPIC", "UNAUTHORIZED_ON_TOPIC", "MESSAGE_TOO_LARGE", "INVALID_PARTITION",
	"INVALID_EVENT", "RETRIES_EXHAUSTED", "TOPIC_NOT_ALLOWED"}

// Breaker states (outbox_relay_kafka_breaker_state, _transitions_total).
var breakerStates = []string{"closed", "half-open", "open"}

// Outcomes of a dead letter (outbox_relay_events_dead_lettered_total).
const (
	DeadLetterSent    = "sent"
	DeadLetterRefused = "refused"
)

// deadLetteredKey prefixes the dead-letter counters' keys in labelCounters.
const deadLetteredKey = "dead_lettered/"

// mappedOutcomes are the outcomes a mapped table's counters have from the
// moment it is first seen.
var mappedOutcomes = []string{Published, Sent, Retried, Failed, Queued}

// New makes the metrics of a relay of the given version.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), topics: map[string]*labelCounters{}, tables: map[string]*labelCounters{},
		parked: map[parkedKey]float64{}, maxTopics: MaxTopicsDefault}
	f := factory{reg: m.reg, docs: &m.catalog}
	m.published = f.counterVec("events_published_total", "Events handed to Kafka, once per attempt.", "topic")
	m.sent = f.counterVec("events_sent_total", "Events acknowledged by Kafka and recorded SENT.", "topic")
	m.retried = f.counterVec("events_retried_total", "Failed delivery attempts left PENDING for a retry with backoff.", "topic")
	m.failed = f.counterVec("events_failed_total", "Events recorded FAILED, by failure_reason.", "topic", "reason")
	m.mapped = f.counterVec("mapped_events_total", "Events of mapped tables (--tables-config, --debezium-config) by table and "+
		"outcome: published, sent, retried, failed, queued (outbox.events is counted by topic alone).", "table", "outcome")
	m.CommitToAck = f.histogram("commit_to_ack_seconds", "From the event's commit (pgoutput) to Kafka's acknowledgement, streamed events.",
		prometheus.ExponentialBuckets(0.0005, 2, 18))
	m.AckToDurable = f.histogram("ack_to_durable_seconds", "From the earliest Kafka acknowledgement of a group of events to their status rows being durable (buckets up to 131 s).",
		prometheus.ExponentialBuckets(0.001, 2, 18)) // up to 131 s: past a status write retried after --statement-timeout
	// Up to 65.5 s: past --statement-timeout's default (30 s), which ends a statement.
	m.Statement = f.histogramVec("status_statement_duration_seconds", "Duration of the relay's status statements: "+
		"insert_outcomes (streamed events), record_outcomes (the poller's), direct_outcomes (events read from the table: backfill "+
		"pages, the gap sweep in poll mode), barrier; buckets up to 65 s, past --statement-timeout.",
		prometheus.ExponentialBuckets(0.0005, 2, 18), "statement")
	m.slotLag = f.gaugeVec("slot_lag_bytes", "WAL the slot has not confirmed: the server's WAL end minus confirmed_flush_lsn.", "slot")
	m.ConfirmedLSN = f.gauge("slot_confirmed_lsn", "The LSN this relay last confirmed on the slot, as a number.")
	m.InFlight = f.gauge("in_flight_events", "Events read from the slot without a status row yet.")
	m.InFlightBytes = f.gauge("in_flight_bytes", "Bytes of those events.")
	m.breaker = f.gaugeVec("kafka_breaker_state", "1 for the Kafka circuit breaker's current state (closed, half-open, open).", "state")
	m.breakerTransitions = f.counterVec("kafka_breaker_transitions_total", "Circuit breaker transitions, by the state entered.", "to")
	m.Claimed = f.counter("poller_claimed_total", "Rows the poller claimed for delivery.")
	m.deadLettered = f.counterVec("events_dead_lettered_total", "FAILED events published on the dead-letter topic "+
		"(--dead-letter-topic), by their original topic; outcome sent, or refused (the topic refused it: the row's dead_letter_error says why).",
		"topic", "outcome")
	m.Rescued = f.counter("poller_rescued_total", "Rows stuck in PROCESSING that the poller took back.")
	m.GapSwept = f.counter("gap_swept_total", "Events without a status row that the gap sweep gave a row (PENDING, or in poll mode, where it delivers them, their outcome).")
	m.GapSweepBehind = f.gauge("gap_sweep_behind_seconds", "How far the gap sweep's cursor is behind its horizon: large after a start, "+
		"while the first sweep walks --gap-lookback window by window at its pace, then about --poll-interval.")
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
	f.gaugeFunc("ready", "1 while /readyz answers 200: this instance can deliver (a standby is 0).",
		func() float64 { return boolFloat(m.readReady()) })
	m.role = f.gaugeVec("role", "1 for this instance's role: starting, streaming, standby or polling.", "role")
	f.gaugeVec("build_info", "Build information; always 1.", "version", "go_version").WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.SetRole(RoleStarting)
	m.SetBreaker("closed")
	for _, s := range breakerStates {
		m.breakerTransitions.WithLabelValues(s) // at 0: the first transition is a visible increase
	}
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

// WatchReady has outbox_relay_ready call ready (nil: ready) at each scrape.
func (m *Metrics) WatchReady(ready func() error) { m.ready.Store(&ready) }

func (m *Metrics) readReady() bool {
	f := m.ready.Load()
	return f != nil && (*f)() == nil
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
	for _, s := range breakerStates {
		m.breaker.WithLabelValues(s).Set(boolFloat(s == state))
	}
}

// BreakerTransition counts the breaker entering state.
func (m *Metrics) BreakerTransition(state string) {
	m.SetBreaker(state)
	m.breakerTransitions.WithLabelValues(state).Inc()
}

// SetSlotLag records the WAL slot has not confirmed, in bytes.
func (m *Metrics) SetSlotLag(slot string, bytes int64) {
	m.slotLag.WithLabelValues(slot).Set(float64(bytes))
}

// Observe times a status statement.
func (m *Metrics) Observe(statement string, start time.Time) {
	m.Statement.WithLabelValues(statement).Observe(time.Since(start).Seconds())
}

// CountDeadLetters makes each topic's dead-letter counters with its others
// (--dead-letter-topic is set).
func (m *Metrics) CountDeadLetters() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deadLetters = true
}

// DeadLettered counts a failure of topic published on the dead-letter
// topic (outcome DeadLetterSent), or refused by it (DeadLetterRefused);
// refused says the event was never sent to its topic.
func (m *Metrics) DeadLettered(topic string, refused bool, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addLocked(false, m.labelOf(topic, refused), deadLetteredKey+outcome, 1)
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

// labelOf is topic's label value: its own name once it has one; else
// TopicRefused for an event never sent to it (refused), its own name while
// fewer than maxTopics topics have one (its counters made at 0), TopicOther
// past that. m.mu is held.
func (m *Metrics) labelOf(topic string, refused bool) string {
	switch _, ok := m.topics[topic]; {
	case ok && topic != TopicRefused && topic != TopicOther:
		return topic
	case refused:
		return TopicRefused
	case m.named >= m.maxTopics:
		return TopicOther
	}
	m.named++
	m.labelLocked(false, topic)
	return topic
}

// addLocked adds n to the counter name of a topic (or mapped table),
// making the label's counters at 0 the first time, and parks it while no
// scrape has shown them. m.mu is held.
func (m *Metrics) addLocked(table bool, label, name string, n float64) {
	lc := m.labelLocked(table, label)
	if lc.born >= m.shown {
		m.parked[parkedKey{table, label, name}] += n
		return
	}
	m.counterLocked(table, label, lc, name).Add(n)
}

// labelLocked returns the counters of a topic (or mapped table), making
// them at 0 the first time. m.mu is held.
func (m *Metrics) labelLocked(table bool, label string) *labelCounters {
	byLabel := m.topics
	if table {
		byLabel = m.tables
	}
	lc := byLabel[label]
	if lc != nil {
		return lc
	}
	lc = &labelCounters{born: m.scrapes, counters: map[string]prometheus.Counter{}}
	byLabel[label] = lc
	if table {
		for _, o := range mappedOutcomes {
			m.counterLocked(table, label, lc, o)
		}
		return lc
	}
	for _, o := range []string{Published, Sent, Retried} {
		m.counterLocked(table, label, lc, o)
	}
	for _, r := range FailureReasons {
		m.counterLocked(table, label, lc, Failed+"/"+r)
	}
	if m.deadLetters {
		m.counterLocked(table, label, lc, deadLetteredKey+DeadLetterSent)
		m.counterLocked(table, label, lc, deadLetteredKey+DeadLetterRefused)
	}
	return lc
}

// counterLocked returns lc's counter name (outcome, or outcome/reason),
// made the first time. m.mu is held.
func (m *Metrics) counterLocked(table bool, label string, lc *labelCounters, name string) prometheus.Counter {
	c := lc.counters[name]
	if c != nil {
		return c
	}
	outcome, reason, _ := strings.Cut(name, "/")
	switch {
	case table:
		c = m.mapped.WithLabelValues(label, outcome)
	case outcome == Published:
		c = m.published.WithLabelValues(label)
	case outcome == Sent:
		c = m.sent.WithLabelValues(label)
	case outcome == Retried:
		c = m.retried.WithLabelValues(label)
	case outcome == Failed:
		c = m.failed.WithLabelValues(label, reason)
	default: // deadLetteredKey
		c = m.deadLettered.WithLabelValues(label, reason)
	}
	lc.counters[name] = c
	return c
}

// beginScrape and endScrape bracket a scrape of /metrics: once it is
// served, the labels made before it began have been shown at 0 and their
// parked counts are added.
func (m *Metrics) beginScrape() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scrapes++
	return m.scrapes
}

func (m *Metrics) endScrape(scrape uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shown = max(m.shown, scrape)
	for k, n := range m.parked {
		byLabel := m.topics
		if k.table {
			byLabel = m.tables
		}
		if lc := byLabel[k.label]; lc.born < m.shown {
			m.counterLocked(k.table, k.label, lc, k.name).Add(n)
			delete(m.parked, k)
		}
	}
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
