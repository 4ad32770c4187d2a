package relay

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

const (
	// queueRefresh is how often the stream looks at the queued keys in the
	// table, and checks whether a spill can end.
	queueRefresh = time.Second
	// spillCheck is how often the stream checks whether Kafka has been
	// unavailable for SpillAfter.
	spillCheck = 250 * time.Millisecond
	// drainPatience: a key that keeps draining (its queue never empties
	// because new events keep joining it) this long makes the stream pause
	// until the queue has drained, so that the key goes back to the stream.
	drainPatience = 5 * time.Second
	// drainWait bounds such a pause, and the one that ends a spill.
	drainWait = time.Second
)

// hold reports whether FAILED events hold their key.
func (r *Relay) hold() bool { return r.cfg.FailedKeyPolicy == FailedKeyHold }

// spills reports whether the relay spills at all.
func (r *Relay) spills() bool { return r.cfg.SpillAfter > 0 }

// wakePoller has the poller start its next round now.
func (r *Relay) wakePoller() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// startQueue sets the session's queue up before anything streams: a spill
// if Kafka has been down for SpillAfter already, otherwise the keys the
// table has queued.
func (s *session) startQueue(ctx context.Context) error {
	if s.spillIfDown() {
		return nil
	}
	s.pub.Defer(false) // a spill of an earlier session may have left it on
	var keys []store.QueuedKey
	err := outage.Retry(ctx, s.pgDown, func(ctx context.Context) error {
		var err error
		keys, err = s.r.store.QueuedKeys(ctx, s.r.hold(), maxQueuedKeys+1)
		return err
	})
	if err != nil {
		return err
	}
	s.applyKeys(keys, 0, false)
	return nil
}

// watchSpill starts a spill once Kafka has been unavailable for
// SpillAfter, until the session stops reading.
func (s *session) watchSpill() error {
	t := time.NewTicker(spillCheck)
	defer t.Stop()
	for {
		select {
		case <-s.hard.Done():
			return nil
		case <-s.readDone:
			return nil
		case <-t.C:
			s.spillIfDown()
		}
	}
}

// spillIfDown starts a spill if Kafka has been unavailable for SpillAfter
// and the queue does not spill yet, and reports whether it did.
func (s *session) spillIfDown() bool {
	down := s.pub.UnavailableFor()
	if !s.r.spills() || down < s.r.cfg.SpillAfter || !s.queue.spill(s.pub) {
		return false
	}
	s.r.metrics.Spilling.Set(1)
	events, bytes := s.win.used()
	s.r.log.Warn("spilling: kafka unavailable for longer than --spill-after; events are queued as PENDING rows "+
		"(no attempt counted) so that the slot moves on and PostgreSQL can recycle its WAL",
		zap.Duration("unavailable_for", down), zap.Duration("spill_after", s.r.cfg.SpillAfter),
		zap.Int("in_flight_events", events), zap.Int("in_flight_bytes", bytes))
	return true
}

// refreshQueue runs in the produce stage between batches, so nothing is
// routed meanwhile: it reads the queued keys from the table and, once Kafka
// is back, ends a spill. Ending a spill (and releasing keys that kept
// draining for drainPatience) pauses the stage until every event routed so
// far has its row and the queue in the table has drained, at most
// drainWait: the table then lists every key the stream must still queue.
func (s *session) refreshQueue() {
	spilling, _ := s.queue.state()
	up := s.pub.Available()
	if spilling && !up {
		return // nothing drains while Kafka is down
	}
	// While a backfill runs, its keys' queues cannot drain (their streamed
	// events wait for it): no pause for them.
	pause := up && (spilling || !s.queue.backfillRunning() && !s.drainingSince.IsZero() && time.Since(s.drainingSince) > drainPatience)
	if pause && !s.waitWritten(s.routed, 2*drainWait) {
		return
	}
	deadline := time.Now().Add(drainWait)
	backfilled := s.backfillDone.Load()
	for {
		written := s.written.Load()
		keys, err := s.r.store.QueuedKeys(s.hard, s.r.hold(), maxQueuedKeys+1)
		if err != nil {
			s.r.log.Debug("reading queued keys; trying again later", zap.Error(err))
			return
		}
		draining := countDraining(keys)
		if !pause || draining == 0 || time.Now().After(deadline) {
			if !(spilling && draining > 0) {
				s.applyKeys(keys, written, spilling)
				if backfilled {
					s.queue.endBackfill() // keys now has every key the backfill queued
				}
			}
			s.noteDraining(draining)
			return
		}
		s.r.wakePoller()
		if !outage.Sleep(s.hard, 20*time.Millisecond) {
			return
		}
	}
}

// applyKeys makes keys (read once every event up to written had its row)
// the queued keys, ending a spill if there was one.
func (s *session) applyKeys(keys []store.QueuedKey, written uint64, spilling bool) {
	ok, spilled := s.queue.replace(keys, written, s.pub)
	_, n := s.queue.state()
	s.r.metrics.QueuedKeys.Set(float64(n))
	switch {
	case !ok && !spilling:
		s.r.metrics.Spilling.Set(1)
		s.r.log.Warn("queueing every event: more keys have queued events than the relay keeps in memory",
			zap.Int("max_queued_keys", maxQueuedKeys))
	case ok && spilling:
		s.r.metrics.Spilling.Set(0)
		s.r.log.Info("spill over: the stream publishes directly again; keys with events still queued keep queueing "+
			"until theirs are delivered", zap.Int64("events_queued_during_spill", spilled), zap.Int("keys_still_queued", n))
	}
}

// noteDraining keeps drainingSince: when the keys in the table started to
// have events on their way (zero while none has).
func (s *session) noteDraining(draining int) {
	switch {
	case draining == 0:
		s.drainingSince = time.Time{}
	case s.drainingSince.IsZero():
		s.drainingSince = time.Now()
	}
}

func countDraining(keys []store.QueuedKey) (n int) {
	for _, k := range keys {
		if k.Draining {
			n++
		}
	}
	return n
}

// waitWritten waits until every event up to seq has its status row in the
// table, at most d, and reports whether it does.
func (s *session) waitWritten(seq uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.written.Load() < seq {
		if time.Now().After(deadline) || !outage.Sleep(s.hard, time.Millisecond) {
			return false
		}
	}
	return true
}
