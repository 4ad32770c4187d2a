package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/outage"
)

// observeEvery is how often the gauges read from PostgreSQL are refreshed.
const observeEvery = 10 * time.Second

// observe refreshes the gauges that are read rather than counted: the
// slot's confirmed position, what is in flight, and the PENDING and FAILED
// counts. (The poller sets the slot's lag, which it reads every round.)
func (r *Relay) observe(ctx context.Context) {
	for {
		if s := r.current.Load(); s != nil {
			r.metrics.ConfirmedLSN.Set(float64(s.tr.Confirmed()))
			events, bytes := s.win.used()
			r.metrics.InFlight.Set(float64(events))
			r.metrics.InFlightBytes.Set(float64(bytes))
		} else {
			r.metrics.InFlight.Set(0)
			r.metrics.InFlightBytes.Set(0)
		}
		if c, err := r.store.Counts(ctx); err == nil {
			r.metrics.Pending.Set(float64(c.Pending))
			r.metrics.OldestPendingAge.Set(c.OldestPendingAge.Seconds())
			r.metrics.Failed.Set(float64(c.Failed))
		}
		if !outage.Sleep(ctx, observeEvery) {
			return
		}
	}
}

// Healthy reports whether the relay's loops make progress: the replication
// receive loop (while streaming) and the poller.
func (r *Relay) Healthy() error {
	stale := func(at time.Time, limit time.Duration) bool { return !at.IsZero() && time.Since(at) > limit }
	if s := r.current.Load(); s != nil && stale(s.stream.LastActive(), max(10*r.cfg.StatusInterval, 30*time.Second)) {
		return errors.New("the replication receive loop has made no progress for " +
			time.Since(s.stream.LastActive()).Round(time.Second).String())
	}
	turn := time.Unix(0, r.pollerTurn.Load())
	pub := r.pub.Load()
	if r.pollerTurn.Load() != 0 && stale(turn, max(20*r.cfg.Poll.Interval, time.Minute)) && (pub == nil || pub.Available()) {
		return errors.New("the poller has not finished a round for " + time.Since(turn).Round(time.Second).String())
	}
	return nil
}

// Progress is how long the streaming session has gone without a message
// from the server, and without progress on the events it holds: zero when
// it is not streaming.
func (r *Relay) Progress() metrics.Progress {
	s := r.current.Load()
	if s == nil {
		return metrics.Progress{}
	}
	_, held := r.heldBackNow()
	return metrics.Progress{Silence: time.Since(s.stream.LastHeard()), Stalled: s.win.stalled(), HeldBack: held}
}

// Ready reports whether this instance can deliver: it streams (or polls,
// in poll mode), Kafka is reachable and PostgreSQL is, and the stream is
// neither silent nor stalled for --replication-timeout. When it cannot, it
// gives every reason that holds, in that order: a frozen network path takes
// the pool's connections with the replication connection, and reporting
// only "postgres unavailable" would hide that the stream went silent.
func (r *Relay) Ready() error {
	var reasons []string
	switch role := r.role.Load(); {
	case role == nil || *role == metrics.RoleStarting:
		reasons = append(reasons, "starting")
	case *role == metrics.RoleStandby:
		return errors.New("standby: another relay streams from slot " + r.cfg.Slot)
	}
	if pub := r.pub.Load(); (pub == nil && len(reasons) == 0) || (pub != nil && !pub.Available()) {
		why := "kafka unavailable: circuit breaker " + pubState(pub)
		if pub != nil && pub.LastError() != nil {
			why += ": " + pub.LastError().Error()
		}
		reasons = append(reasons, why)
	}
	for _, o := range []*outage.Log{r.startDown, r.pollerDown, r.streamDown} {
		if err := o.Why(); err != nil { // set only while down
			reasons = append(reasons, "postgres unavailable: "+err.Error())
			break
		}
	}
	limit := r.cfg.ReplicationTimeout
	switch p := r.Progress(); {
	case p.Silence >= limit:
		reasons = append(reasons, fmt.Sprintf("nothing from postgres on the replication connection of slot %s for %s (--replication-timeout %s): reconnecting",
			r.cfg.Slot, p.Silence.Round(time.Second), limit))
	case p.Stalled >= limit:
		reasons = append(reasons, fmt.Sprintf("events in flight have made no progress for %s (--replication-timeout %s): "+
			"Kafka or the status writes to postgres are not completing", p.Stalled.Round(time.Second), limit))
	case r.reconnecting.Load():
		reasons = append(reasons, fmt.Sprintf("the replication connection of slot %s went silent: reconnecting", r.cfg.Slot))
	}
	if h, held := r.heldBackNow(); held {
		reasons = append(reasons, fmt.Sprintf("postgres holds slot %s back until the standby of replication slot %s "+
			"(synchronized_standby_slots) confirms: %s", r.cfg.Slot, h.standbySlot, h.why))
	}
	if len(reasons) == 0 {
		return nil
	}
	return errors.New(strings.Join(reasons, "; "))
}

func (r *Relay) setRole(role string) {
	r.role.Store(&role)
	r.metrics.SetRole(role)
}
