package relay

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// direct delivers events read from the table (a backfill's pages, the gap
// sweep's finds in poll mode) as the stream delivers the ones it decodes:
// published in order, then given their status rows in one statement, with
// no PENDING row written only for a claim to take. An event whose key must
// wait gets a PENDING row, due now, instead, and the poller delivers it
// behind the rows it waits for (by insertion order, which pages follow):
// keys the page says wait, keys direct was told wait, and keys of which it
// met an event that has a row by now (someone else owns it) or that it did
// not send (deferred in a spill, or with the hold policy, not SENT).
type direct struct {
	pub     *kafka.Publisher
	settle  *settler
	log     *zap.Logger
	metrics *metrics.Metrics
	tally   *metrics.Tally
	status  *statusLatency // the status statements' time (nil: not measured)
	hold    bool
	policy  []byte    // the configured retry policy's JSON, for the rows it writes
	ce      *ceWriter // nil: records are not CloudEvents

	waiting map[string]struct{} // appendKey
	// all: more keys wait than waiting keeps: every event with a key does.
	all  bool
	buf  []byte
	msgs []*kafka.Message
	rows store.Outcomes
}

// newDirect returns a direct delivery for which the keys waiting wait.
func (r *Relay) newDirect(pub *kafka.Publisher, waiting []store.QueuedKey) *direct {
	d := &direct{pub: pub, settle: r.settle, log: r.log, metrics: r.metrics, tally: r.metrics.NewTally(), status: &r.statusTime,
		hold: r.hold(), policy: r.cfg.Retry.JSON(), ce: r.ce, waiting: make(map[string]struct{}, len(waiting))}
	for _, k := range waiting {
		d.buf = appendKey(d.buf[:0], k.Topic, []byte(k.Key))
		d.waiting[string(d.buf)] = struct{}{}
	}
	return d
}

// reset forgets which keys wait, keeping the map's memory for the next
// round.
func (d *direct) reset() {
	clear(d.waiting)
	d.all = false
}

// waits reports whether e's key waits; with wait, it makes it wait.
func (d *direct) waits(e *event, wait bool) bool {
	key := e.Key()
	if key == nil {
		return false
	}
	if d.all {
		return true
	}
	d.buf = appendKey(d.buf[:0], e.Record.Topic, key)
	if _, ok := d.waiting[string(d.buf)]; ok || !wait {
		return ok
	}
	if len(d.waiting) >= maxQueuedKeys {
		d.all = true
	} else {
		d.waiting[string(d.buf)] = struct{}{}
	}
	return true
}

// deliver delivers a page of events in insertion order, writing their rows
// through st, and returns how many rows it wrote.
func (d *direct) deliver(ctx context.Context, st *store.Store, page *store.EventPage) (int64, error) {
	b, err := loadBatch(page.Events, d.ce, len(page.Values), time.Now(), func(i int) [][]byte { return page.Values[i] })
	if err != nil {
		return 0, err
	}
	for i := range b.events {
		e := &b.events[i]
		switch {
		case page.HasRow != nil && page.HasRow[i]:
			e.skip = true
			d.waits(e, true)
		case e.invalid == "" && d.waits(e, page.Waits != nil && page.Waits[i]):
			e.Outcome = kafka.Outcome{Result: kafka.Deferred}
		}
	}
	b.pending.Store(int32(len(b.events)) + 1)
	d.msgs = b.messages(d.msgs[:0])
	if err := b.publish(ctx, d.pub, d.msgs); err != nil {
		return 0, err
	}
	d.rows.Reset()
	for i := range b.events {
		e := &b.events[i]
		if e.skip {
			continue
		}
		o := d.settle.outcome(e, 0, d.settle.policy(e.maxAttempts), 0)
		d.rows.Add(o)
		count(d.tally, e, o)
		if e.deferred() || d.hold && o.Status != store.StatusSent {
			d.waits(e, true)
		}
	}
	start := time.Now()
	written, err := st.InsertOutcomes(ctx, &d.rows, d.policy)
	if err != nil {
		return 0, err
	}
	d.metrics.Observe("direct_outcomes", start)
	d.status.observe(time.Since(start))
	d.tally.Flush()
	return int64(written), nil
}
