package relay

import (
	"sync"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// maxQueuedKeys caps the keys the stream remembers as queued (about 100
// bytes each). With more, it queues every event, which keeps the order
// without the memory.
const maxQueuedKeys = 100_000

// appendKey appends the map key of a topic and key: the topic, a NUL (not
// allowed in a Kafka topic name), the key.
func appendKey(buf []byte, topic string, key []byte) []byte {
	return append(append(append(buf, topic...), 0), key...)
}

// queue decides, for the stream, which events are published directly and
// which are queued: given a PENDING row, due now, that the poller delivers
// per key in insertion order (store.Claim). An event is queued while the relay
// spills (Kafka has been down for --spill-after, or more keys are queued
// than fit in memory) and when its key has queued events, or, with the hold
// policy, an event waiting for a retry or FAILED. So an event never
// overtakes an earlier one of its key that is queued.
//
// The keys come from the table (store.QueuedKeys) and from what the stream
// itself queues or sees fail. A key the table no longer lists is forgotten
// only once every event the stream queued for it was written before that
// look at the table (refresh), so a queued event still on its way to the
// table keeps its key queued.
type queue struct {
	mu       sync.Mutex
	spilling bool
	// While the new slot's backfill runs, the keys of the events it will
	// find (backfillKeys) stay queued whatever the table says; with more
	// keys than that, backfilling: every event with a key queues, and its
	// key is remembered as queued.
	backfilling  bool
	backfillKeys map[string]struct{}
	// keys maps each key whose new events queue (appendKey) to the
	// session's count of events up to the last one queued for it (0: known
	// from the table). A pointer, so that the per-event update of a key
	// already there allocates nothing.
	keys map[string]*uint64
	buf  []byte // appendKey's scratch
	// spilled counts events queued during the current spill, for the log.
	spilled int64
}

func newQueue() *queue { return &queue{keys: map[string]*uint64{}} }

// seqOf returns the entry of e's key (nil when it has none); ok is false for
// an event without a key, which is never held.
func (q *queue) seqOf(e *event) (seq *uint64, ok bool) {
	key := e.Key()
	if key == nil {
		return nil, false
	}
	q.buf = appendKey(q.buf[:0], e.Record.Topic, key)
	return q.keys[string(q.buf)], true
}

// route marks the events of b (numbered firstSeq .. lastSeq) that
// queue, and returns how many do.
func (q *queue) route(b *batch) (queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.spilling && !q.backfilling && len(q.keys) == 0 {
		return 0
	}
	first := b.firstSeq()
	for i := range b.events {
		e := &b.events[i]
		if e.skip || e.invalid != "" {
			continue
		}
		last, keyed := q.seqOf(e)
		e.afterBackfill = keyed && q.behindBackfill()
		if !q.spilling {
			switch {
			case last != nil:
				*last = first + uint64(i)
			case !keyed || !q.backfilling:
				continue // no key, or a key that does not queue
			case len(q.keys) >= maxQueuedKeys:
				q.spilling = true // too many keys to remember: queue everything
			default:
				seq := first + uint64(i)
				q.keys[string(q.buf)] = &seq
			}
		}
		e.Outcome = kafka.Outcome{Result: kafka.Deferred}
		queued++
	}
	if q.spilling {
		q.spilled += int64(queued)
	}
	return queued
}

// behindBackfill reports whether the key seqOf just put in q.buf has events
// the running backfill may not have given a row yet: one of the backfill's
// keys, or with more than it remembers, any key. Call with q.mu held.
func (q *queue) behindBackfill() bool {
	if q.backfilling {
		return true
	}
	_, ok := q.backfillKeys[string(q.buf)]
	return ok
}

// hold notes that e (number seq) waits for a retry or failed, under the
// hold policy: its key's new events queue.
func (q *queue) hold(e *event, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch last, keyed := q.seqOf(e); {
	case last != nil:
		*last = max(*last, seq)
	case keyed:
		q.keys[string(q.buf)] = &seq
	}
}

// deferrer is the publisher as a spill drives it (kafka.Publisher.Defer).
type deferrer interface{ Defer(on bool) }

// spill makes every event queue and has p defer what an outage holds; it
// reports whether the spill is new. The publisher defers exactly while the
// queue spills: both change under q.mu.
func (q *queue) spill(p deferrer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	p.Defer(true)
	if q.spilling {
		return false
	}
	q.spilling, q.spilled = true, 0
	return true
}

// replace makes the keys found in the table, plus the keys of events queued
// after the look (numbered above written: the session's count of events
// whose rows were in the table before it), the keys that queue. When the
// queue spills, the caller has made sure that the table holds everything
// queued (written covers it); the spill ends and p no longer defers, and
// spilled is how many events it queued.
//
// With more than maxQueuedKeys keys it changes nothing but starts (or
// keeps) a spill: ok is false.
func (q *queue) replace(table []store.QueuedKey, written uint64, p deferrer) (ok bool, spilled int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := make(map[string]*uint64, len(table))
	for _, k := range table {
		q.buf = appendKey(q.buf[:0], k.Topic, []byte(k.Key))
		keys[string(q.buf)] = new(uint64)
	}
	for k, seq := range q.keys {
		if *seq > written {
			keys[k] = seq
		}
	}
	for k := range q.backfillKeys {
		if keys[k] == nil {
			keys[k] = new(uint64)
		}
	}
	if len(keys) > maxQueuedKeys {
		q.spilling = true
		return false, 0
	}
	q.keys = keys
	if q.spilling {
		spilled = q.spilled
		q.spilling, q.spilled = false, 0
		p.Defer(false)
	}
	return true, spilled
}

// backfill marks the new slot's backfill as running, with the keys of the
// events it will find: they queue until endBackfill. With more than
// maxQueuedKeys keys, or with every, every event with a key queues.
func (q *queue) backfill(keys []store.QueuedKey, every bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if every || len(keys) > maxQueuedKeys {
		q.backfilling = true
		return
	}
	q.backfillKeys = make(map[string]struct{}, len(keys))
	for _, k := range keys {
		q.buf = appendKey(q.buf[:0], k.Topic, []byte(k.Key))
		q.backfillKeys[string(q.buf)] = struct{}{}
		if q.keys[string(q.buf)] == nil {
			q.keys[string(q.buf)] = new(uint64)
		}
	}
}

// endBackfill marks the backfill as finished and read back: the caller has
// just replaced the keys with the table's, read after the backfill's last
// page was written, so every key it queued is among them.
func (q *queue) endBackfill() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.backfilling, q.backfillKeys = false, nil
}

// backfillRunning reports whether the new slot's backfill is running (and
// its keys queue).
func (q *queue) backfillRunning() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.backfilling || q.backfillKeys != nil
}

// state reports whether the queue spills and how many keys queue.
func (q *queue) state() (spilling bool, keys int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.spilling, len(q.keys)
}
