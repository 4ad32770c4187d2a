package relay

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// heldBack is why PostgreSQL holds the slot's changes back for a standby
// (synchronized_standby_slots, PostgreSQL 17 and newer).
type heldBack struct {
	standbySlot string
	why         string // what the server said, or what the relay measured
}

// heldBackNow reports whether the server holds the slot back now: it said
// so on the replication connection (a standby that is not connected), or a
// connected standby has not confirmed, within --replication-timeout, WAL the
// primary had already written (lagWatch).
func (r *Relay) heldBackNow() (heldBack, bool) {
	if s := r.current.Load(); s != nil {
		if h, ok := s.stream.HeldBack(r.cfg.ReplicationTimeout); ok {
			return heldBack{standbySlot: h.StandbySlot, why: h.Message}, true
		}
	}
	if h := r.lagging.Load(); h != nil {
		return *h, true
	}
	return heldBack{}, false
}

// heldBackEvery is how often watchHeldBack looks at the stream's word.
const heldBackEvery = time.Second

// watchHeldBack logs, once a spell, that PostgreSQL holds the slot back
// for a standby, and once that it goes on. With --slot-failover it also
// reads the standbys' slots every quarter of --replication-timeout, for a
// standby that is connected but behind, of which the server says nothing.
func (r *Relay) watchHeldBack(ctx context.Context) {
	lag := lagWatch{limit: r.cfg.ReplicationTimeout, marks: map[string]lagMark{}}
	every := max(r.cfg.ReplicationTimeout/4, heldBackEvery)
	var held bool
	var read time.Time
	for outage.Sleep(ctx, heldBackEvery) {
		if r.cfg.SlotFailover && time.Since(read) >= every {
			read = time.Now()
			if slots, err := r.store.StandbySlots(ctx); err == nil {
				h, ok := lag.update(slots, read)
				if ok {
					r.lagging.Store(&h)
				} else {
					r.lagging.Store(nil)
				}
			}
		}
		h, now := r.heldBackNow()
		switch {
		case now && !held:
			r.log.Warn("postgres holds the slot's changes back until a standby confirms them: the standby of replication slot "+
				h.standbySlot+" named in synchronized_standby_slots is down or behind; start it or let it catch up, or remove it "+
				"from synchronized_standby_slots on the primary (events are delayed, not lost)",
				zap.String("slot", r.cfg.Slot), zap.String("standby_slot", h.standbySlot),
				zap.String("setting", "synchronized_standby_slots"), zap.String("why", h.why))
		case !now && held:
			r.log.Info("postgres no longer holds the slot back for a standby", zap.String("slot", r.cfg.Slot))
		}
		held = now
	}
}

// lagWatch finds a connected standby of synchronized_standby_slots that
// has not confirmed, within limit, the WAL the primary had written when it
// was last seen to catch up: PostgreSQL holds failover slots back behind
// it, and warns only of a standby that is not connected.
type lagWatch struct {
	limit time.Duration
	marks map[string]lagMark // standby slot -> the WAL end it must pass
}

// lagMark is a WAL end a standby had not confirmed, and when it was seen.
type lagMark struct {
	walEnd uint64
	at     time.Time
}

// update reads the standbys' slots as they are at now and returns the one
// that has been behind a mark for limit or longer, if any.
func (w *lagWatch) update(slots []store.StandbySlot, now time.Time) (heldBack, bool) {
	var late *heldBack
	for _, s := range slots {
		m, marked := w.marks[s.Name]
		switch {
		case !s.Exists || !s.Active || s.Confirmed >= s.WALEnd:
			delete(w.marks, s.Name) // caught up (or not connected: the server says so itself)
		case !marked || s.Confirmed >= m.walEnd:
			w.marks[s.Name] = lagMark{walEnd: s.WALEnd, at: now} // it passed the last mark: a new one
		case now.Sub(m.at) >= w.limit && late == nil:
			late = &heldBack{standbySlot: s.Name, why: fmt.Sprintf("its standby has not confirmed in %s the WAL the primary had written "+
				"(%d bytes behind now)", now.Sub(m.at).Round(time.Second), s.BehindBytes)}
		}
	}
	if late == nil {
		return heldBack{}, false
	}
	return *late, true
}
