package relay

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

// HistoryRetentionDefault is how long the per-minute counts of the
// console's History (outbox.delivery_minutes) are kept: its page shows the
// last 24 hours, the day before stays for a comparison.
const HistoryRetentionDefault = 48 * time.Hour

// History pacing: the counts are added to outbox.delivery_minutes every
// historyFlushEvery (a crash loses at most as much), rows older than the
// retention are deleted at most every historyPruneEvery, and counts the
// database did not take are kept, for the next flush, for historyHoldBack.
const (
	historyFlushEvery = 5 * time.Second
	historyPruneEvery = time.Minute
	historyHoldBack   = time.Hour
)

// minuteKey is a minute (Unix seconds) and a topic label.
type minuteKey struct {
	minute int64
	topic  string
}

// minuteCounts are the events of a minute and topic recorded SENT and FAILED.
type minuteCounts struct{ delivered, failed int64 }

// minutes counts, per minute and topic label, the events this relay
// recorded SENT and FAILED: every metrics.Tally's Flush, after the status
// rows of its group were written, hands them over (a map increment under a
// briefly held lock, once per topic of a group). The topic labels are the
// metrics' (--metrics-max-topics bounds them), so a minute holds at most
// that many topics and two more.
type minutes struct {
	now    func() time.Time
	mu     sync.Mutex
	counts map[minuteKey]minuteCounts
}

func newMinutes(now func() time.Time) *minutes {
	return &minutes{now: now, counts: map[minuteKey]minuteCounts{}}
}

// AddOutcomes counts sent and failed events of topic in the current minute
// (metrics.OutcomeSink).
func (h *minutes) AddOutcomes(topic string, sent, failed int64) {
	k := minuteKey{h.now().Unix() / 60 * 60, topic}
	h.mu.Lock()
	c := h.counts[k]
	c.delivered += sent
	c.failed += failed
	h.counts[k] = c
	h.mu.Unlock()
}

// take empties h and returns what it held.
func (h *minutes) take() []store.MinuteCount {
	h.mu.Lock()
	counts := h.counts
	h.counts = make(map[minuteKey]minuteCounts, len(counts))
	h.mu.Unlock()
	out := make([]store.MinuteCount, 0, len(counts))
	for k, c := range counts {
		out = append(out, store.MinuteCount{Minute: time.Unix(k.minute, 0).UTC(), Topic: k.topic, Delivered: c.delivered, Failed: c.failed})
	}
	return out
}

// putBack adds counts a flush could not write to what h holds, but those
// of minutes before since: how many events it dropped so is returned.
func (h *minutes) putBack(counts []store.MinuteCount, since time.Time) (dropped int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range counts {
		if x.Minute.Before(since) {
			dropped += x.Delivered + x.Failed
			continue
		}
		k := minuteKey{x.Minute.Unix(), x.Topic}
		c := h.counts[k]
		c.delivered += x.Delivered
		c.failed += x.Failed
		h.counts[k] = c
	}
	return dropped
}

// historyWriter adds a relay's per-minute counts to outbox.delivery_minutes
// (with each minute's total) and outbox.delivery_hours every
// historyFlushEvery, in one additive statement (so several relays add up),
// and deletes rows older than its retention. Every relay runs one.
type historyWriter struct {
	counts    *minutes
	store     *store.Store
	retention time.Duration
	now       func() time.Time
	log       *zap.Logger
	pruned    time.Time // when it last deleted old rows
	failing   bool      // the last flush failed (logged once until one succeeds)
}

// run flushes every historyFlushEvery until ctx ends; the relay flushes
// once more after its stream and poller have stopped (Run).
func (h *historyWriter) run(ctx context.Context) {
	t := time.NewTicker(historyFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.flush(ctx)
		}
	}
}

// flush writes what the counts hold, keeping it for the next flush if the
// database refuses (up to historyHoldBack), then deletes rows past the
// retention if it has not for historyPruneEvery.
func (h *historyWriter) flush(ctx context.Context) {
	now := h.now()
	if counts := h.counts.take(); len(counts) > 0 {
		if err := h.store.AddDeliveryMinutes(ctx, counts); err != nil {
			dropped := h.counts.putBack(counts, now.Add(-historyHoldBack))
			if !h.failing || dropped > 0 {
				h.log.Warn("history: adding per-minute counts to outbox.delivery_minutes failed; trying again in "+historyFlushEvery.String(),
					zap.Int64("events_dropped", dropped), zap.Error(err))
			}
			h.failing = true
			return
		}
		if h.failing {
			h.log.Info("history: per-minute counts written again")
			h.failing = false
		}
	}
	if now.Sub(h.pruned) < historyPruneEvery {
		return
	}
	if _, err := h.store.DeleteDeliveryMinutes(ctx, now.Add(-h.retention)); err != nil {
		h.log.Warn("history: deleting per-minute counts past --history-retention failed; trying again later", zap.Error(err))
		return
	}
	h.pruned = now
}
