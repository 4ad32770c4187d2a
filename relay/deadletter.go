package relay

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/retry"
)

// The headers a dead letter carries besides its record's own. Ours say
// everything the status row says of the failure; two of Kafka Connect's
// dead-letter-queue headers repeat the topic and the error for tooling
// that already reads them.
const (
	HeaderDLTTopic     = "outbox-dlt-original-topic"
	HeaderDLTReason    = "outbox-dlt-reason"
	HeaderDLTAttempts  = "outbox-dlt-attempts"
	HeaderDLTLastError = "outbox-dlt-last-error"
	HeaderDLTFailedAt  = "outbox-dlt-failed-at"
	HeaderDLTEventID   = kafka.HeaderEventID
	HeaderConnectTopic = "__connect.errors.topic"
	HeaderConnectError = "__connect.errors.exception.message"
)

// deadLetters publishes every failure of an event on the dead-letter topic
// once (--dead-letter-topic), beside the stream and the poller, through
// the relay's publisher: an outage waits, as for any message, and never
// fails it. The status row stays the truth; it records how the dead letter
// went (dead_letter_status).
type deadLetters struct {
	topic   string
	store   *store.Store
	pub     *kafka.Publisher
	ce      *ceWriter
	tables  []*mapping.Table
	log     *zap.Logger
	metrics *metrics.Metrics
	batch   int
	// lease is how long a relay holds the rows it publishes: one that dies
	// lets them go then (the poller's stuck threshold).
	lease time.Duration
	// again is the wait before a dead letter Kafka did not take is tried
	// again (the retry policy's first wait).
	again time.Duration
	idle  time.Duration // the wait when there is nothing to publish
	since time.Time     // failures before it are not published
}

func (r *Relay) newDeadLetters(pub *kafka.Publisher) *deadLetters {
	return &deadLetters{topic: r.cfg.Kafka.DeadLetterTopic, store: r.store, pub: pub, ce: r.ce, tables: r.cfg.Tables,
		log:     r.log.With(zap.String("component", "dead letters"), zap.String("dead_letter_topic", r.cfg.Kafka.DeadLetterTopic)),
		metrics: r.metrics, batch: r.cfg.Poll.BatchSize, lease: r.cfg.Poll.StuckThreshold,
		again: max(r.cfg.Retry.Delay, time.Second), idle: r.cfg.Poll.Interval}
}

// run publishes dead letters until ctx ends.
func (d *deadLetters) run(ctx context.Context) {
	bo := retry.Reconnect(200*time.Millisecond, 30*time.Second)
	for {
		var err error
		if d.since.IsZero() {
			d.since, err = d.store.DeadLetterSince(ctx, d.topic)
		}
		n := 0
		if err == nil {
			n, err = d.round(ctx)
		}
		wait := d.idle
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			wait = bo.NextBackOff()
			d.log.Warn("publishing dead letters; trying again", zap.Error(err), zap.Duration("in", wait))
		case n > 0:
			bo.Reset()
			continue
		default:
			bo.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// round publishes one batch of failures and records how each went.
func (d *deadLetters) round(ctx context.Context) (int, error) {
	claimed, err := d.store.ClaimDeadLetters(ctx, d.since, d.batch, d.lease)
	if err != nil || len(claimed.Rows) == 0 {
		return 0, err
	}
	b, err := loadBatch(claimed.Events, d.ce, len(claimed.Rows), time.Now(), func(i int) [][]byte { return claimed.Rows[i].Values })
	if err != nil {
		return 0, err
	}
	msgs := make([]*kafka.Message, len(claimed.Rows))
	for i := range claimed.Rows {
		row, e := &claimed.Rows[i], &b.events[i]
		if row.Mapped {
			fillFromCopy(e, row.EventID, row.Copy, d.ce, tableNamed(d.tables, row.Copy))
		}
		msgs[i] = d.letter(e, row, claimed.Events)
	}
	var wg sync.WaitGroup
	wg.Add(len(msgs))
	if err := d.pub.Publish(ctx, msgs, doneFunc(func(*kafka.Message) { wg.Done() })); err != nil {
		return 0, err // stopping: the lease lets the rows go
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done(): // stopping during an outage: the lease lets the rows go
		return 0, ctx.Err()
	}
	outcomes := make([]store.DeadLetterOutcome, len(msgs))
	for i, m := range msgs {
		row := &claimed.Rows[i]
		o := store.DeadLetterOutcome{EventID: row.EventID, FailedAt: row.FailedAt, Status: store.DeadLetterRetry}
		topic := originalTopic(&b.events[i], row)
		// Never sent to its topic: invalid, or no attempt (refused before
		// sending); older relays counted an attempt for TOPIC_NOT_ALLOWED.
		unsent := b.events[i].invalid != "" || row.Attempts == 0 || row.Reason == kafka.ReasonTopicNotAllowed
		switch m.Outcome.Result {
		case kafka.Sent:
			o.Status = store.DeadLetterSent
			d.metrics.DeadLettered(topic, unsent, metrics.DeadLetterSent)
		case kafka.Rejected, kafka.Failed:
			// Refused by the topic, or an error of this record's: a dead
			// letter is tried once, not again and again (the status row
			// stays the truth; a resend that fails again publishes anew).
			o.Status, o.Error = store.DeadLetterFailed, describeOutcome(m.Outcome)
			d.metrics.DeadLettered(topic, unsent, metrics.DeadLetterRefused)
			d.log.Warn("the dead letter of a failed event could not be published; its status row says why (dead_letter_error)",
				zap.String("event_id", string(kafka.FormatUUID(row.EventID))), zap.String("topic", topic), zap.String("error", o.Error))
		default: // Kafka unavailable: a spill deferred it; tried again when Kafka is back
			if m.Outcome.Err != nil {
				d.log.Info("a dead letter will be tried again when Kafka is available", zap.Error(m.Outcome.Err))
			}
		}
		outcomes[i] = o
	}
	return len(msgs), d.store.DeadLettered(context.WithoutCancel(ctx), outcomes, d.again)
}

// doneFunc is a kafka.Receiver.
type doneFunc func(m *kafka.Message)

func (f doneFunc) Done(m *kafka.Message) { f(m) }

// letter is e's dead letter: its record, as the relay publishes it, bound
// for the dead-letter topic with what the status row says of the failure.
// An event that could not be made a record (INVALID_EVENT) goes with its
// key and payload as they are, where they can be read.
func (d *deadLetters) letter(e *event, row *store.DeadLetter, rel *cdc.Relation) *kafka.Message {
	topic := originalTopic(e, row)
	extra := []kafka.Header{
		{Key: []byte(HeaderDLTTopic), Value: []byte(topic)},
		{Key: []byte(HeaderDLTReason), Value: []byte(row.Reason)},
		{Key: []byte(HeaderDLTAttempts), Value: []byte(strconv.Itoa(int(row.Attempts)))},
		{Key: []byte(HeaderDLTLastError), Value: []byte(row.LastError)},
		{Key: []byte(HeaderDLTFailedAt), Value: []byte(row.FailedAt.UTC().Format(time.RFC3339Nano))},
		{Key: []byte(HeaderConnectTopic), Value: []byte(topic)},
		{Key: []byte(HeaderConnectError), Value: []byte(row.LastError)},
	}
	m := &kafka.Message{}
	if e.invalid == "" {
		m.DeadLetter(&e.Message, d.topic, row.EventID, nil, nil, row.FailedAt, extra)
		return m
	}
	// The event's time when a record can carry it, else the failure's.
	at := row.FailedAt
	if !e.at.IsZero() {
		at = e.at
	}
	key, value := rawKeyValue(row, rel)
	m.DeadLetter(nil, d.topic, row.EventID, key, value, at, extra)
	return m
}

// describeOutcome is why a dead letter was not published, for
// dead_letter_error.
func describeOutcome(o kafka.Outcome) string {
	reason := o.Reason
	if reason == "" {
		reason = "NOT_PUBLISHED"
	}
	if o.Err == nil {
		return reason
	}
	return reason + ": " + o.Err.Error()
}

// originalTopic is the topic the event was for: its record's, else the
// status row's, else the event's topic column.
func originalTopic(e *event, row *store.DeadLetter) string {
	switch {
	case e.invalid == "" && e.Record.Topic != "":
		return e.Record.Topic
	case row.Topic != "":
		return row.Topic
	case row.Copy != nil:
		return row.Copy.Topic
	}
	return ""
}

// rawKeyValue reads an unpublishable event's key and payload as they are:
// outbox.events' key and payload columns, or a mapped event's kept record.
func rawKeyValue(row *store.DeadLetter, rel *cdc.Relation) (key, value []byte) {
	if row.Mapped {
		if row.Copy != nil {
			return row.Copy.Key, row.Copy.Value
		}
		return nil, nil
	}
	if i := rel.ColumnIndex("key"); i >= 0 {
		key = row.Values[i]
	}
	if i := rel.ColumnIndex("payload"); i >= 0 && row.Values[i] != nil {
		value = row.Values[i]
		if rel.Columns[i].TypeOID == mapping.OIDJSONB && len(value) > 0 {
			value = value[1:] // jsonb's binary format: a version byte, then its text
		}
	}
	return key, value
}
