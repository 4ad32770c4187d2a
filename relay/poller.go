package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// Defaults for PollerConfig.
const (
	PollIntervalDefault   = 200 * time.Millisecond
	PollBatchSizeDefault  = 2000
	StuckThresholdDefault = 5 * time.Minute
	GapGraceDefault       = 5 * time.Minute
	GapLookbackDefault    = 24 * time.Hour
	GapRecheckDefault     = 30 * time.Second
	GapMaxSlotLagDefault  = 64 << 20
)

// PollerConfig configures the fallback poller that runs in every relay.
type PollerConfig struct {
	// Interval between polls when there was nothing to do.
	Interval time.Duration
	// BatchSize caps rows claimed, recovered or swept per statement.
	BatchSize int
	// StuckThreshold: PROCESSING rows locked longer than this are taken back.
	StuckThreshold time.Duration
	// GapGrace: events younger than this are left to the stream; older ones
	// without a status row are delivered by the gap sweep. -1 means 0.
	GapGrace time.Duration
	// GapRecheck: when it is longer than GapGrace (poll mode), a second,
	// slower pass of the gap sweep trails this far behind now, for events
	// whose created_at is older than their commit by more than the first
	// pass allows for (10 ms): a transaction stalled between taking its
	// start time and reporting it, or an application setting created_at.
	GapRecheck time.Duration
	// GapLookback is how far back the first sweep after start looks.
	GapLookback time.Duration
	// GapMaxSlotLag pauses the sweep (stream mode) while the slot is more
	// than this many bytes of WAL behind: the stream will bring those events.
	GapMaxSlotLag int64
	// InstanceID is written to locked_by; unique per process.
	InstanceID string
}

func (c PollerConfig) withDefaults() PollerConfig {
	c.Interval = cmp.Or(c.Interval, PollIntervalDefault)
	c.BatchSize = cmp.Or(c.BatchSize, PollBatchSizeDefault)
	c.StuckThreshold = cmp.Or(c.StuckThreshold, StuckThresholdDefault)
	c.GapGrace = cmp.Or(c.GapGrace, GapGraceDefault)
	if c.GapGrace < 0 {
		c.GapGrace = 0
	}
	c.GapLookback = cmp.Or(c.GapLookback, GapLookbackDefault)
	c.GapRecheck = cmp.Or(c.GapRecheck, GapRecheckDefault)
	c.GapMaxSlotLag = cmp.Or(c.GapMaxSlotLag, GapMaxSlotLagDefault)
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s-%d", cmp.Or(host, "relay"), os.Getpid())
	}
	return c
}

func (c PollerConfig) validate() error {
	switch {
	case c.Interval < time.Millisecond:
		return errors.New("--poll-interval must be at least 1ms")
	case c.BatchSize < 1:
		return errors.New("--poll-batch-size must be at least 1")
	case c.GapRecheck < 0:
		return errors.New("--gap-recheck must not be negative")
	case c.StuckThreshold < time.Second:
		return errors.New("--stuck-threshold must be at least 1s")
	}
	return nil
}

// poller is the fallback delivery path: it retries PENDING rows with
// backoff, takes back rows whose relay died, and delivers committed events
// that the stream never did (the gap sweep). Every relay runs one;
// --mode=poll runs only it.
type poller struct {
	pollerDeps
	cfg    PollerConfig
	slot   string    // "" in poll mode: no slot to wait for
	cursor time.Time // the gap sweep's
	// recheck is the recheck pass's cursor (GapRecheck), run no sooner
	// than recheckNext.
	recheck     time.Time
	recheckNext time.Time
	sweepNext   time.Time // the stream's sweep walks its next window no sooner (sweepYield)
	paused      bool      // the sweep waits for the stream to catch up
	horizon     store.Horizon
	// mappedAt and mappedRecheck are the two passes' cursors in each of
	// the mapped tables (mapped_walk.go).
	mappedAt, mappedRecheck []store.BackfillCursor
	msgs                    []*kafka.Message
	tally                   *metrics.Tally
}

// pollerDeps are what a poller works with besides its configuration.
type pollerDeps struct {
	store   *store.Store
	pub     *kafka.Publisher
	settle  *settler
	metrics *metrics.Metrics
	status  *statusLatency // the status statements' time (nil: not measured)
	delay   *streamDelay   // how late streamed events reach Kafka (nil: not followed)
	pgDown  *outage.Log    // PostgreSQL as the poller sees it
	log     *zap.Logger
	now     func() time.Time // nil: time.Now
	turned  func()           // called after each round; nil: nothing
	// hold: FAILED rows hold their key (--failed-key-policy=hold).
	hold bool
	// ce writes records as CloudEvents (nil: not); tables are the mapped
	// tables, for their kept records' CloudEvents attributes.
	ce     *ceWriter
	tables []*mapping.Table
	// wake ends the pause between rounds early: the stream waits for the
	// queue to drain. nil: never.
	wake <-chan struct{}
	// direct, in poll mode, delivers what the gap sweep finds without a
	// PENDING row (sweepDirect), at most maxBytes of event values a round.
	// nil: the sweep writes PENDING rows.
	direct   *direct
	maxBytes int
	// mapped are the mapped tables: those with order columns are swept
	// too, through pender, at most mappedBytes of values a page.
	mapped      []*mapping.Table
	pender      *mappedPender
	mappedBytes int
	// mappedFloor: the sweep of mapped tables starts no further back
	// (Config.mappedFloor).
	mappedFloor time.Time
}

// newPoller makes a poller of slot ("" in poll mode).
func newPoller(cfg PollerConfig, slot string, deps pollerDeps) *poller {
	if deps.now == nil {
		deps.now = time.Now
	}
	if deps.turned == nil {
		deps.turned = func() {}
	}
	p := &poller{pollerDeps: deps, cfg: cfg, slot: slot, tally: deps.metrics.NewTally()}
	p.cursor = p.now().Add(-cfg.GapLookback)
	p.recheck = p.cursor
	deps.metrics.GapSweepBehind.Set(cfg.GapLookback.Seconds()) // until its first sweep
	for range deps.mapped {
		p.mappedAt = append(p.mappedAt, store.BackfillCursor{CreatedAt: maxTime(p.cursor, deps.mappedFloor), Seq: -1})
	}
	p.mappedRecheck = slices.Clone(p.mappedAt)
	return p
}

// run polls until ctx ends, then hands back what it holds.
func (p *poller) run(ctx context.Context) {
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.store.Release(ctx, p.cfg.InstanceID); err != nil {
			p.log.Warn("handing back claimed rows at stop", zap.Error(err))
		}
	}()
	for ctx.Err() == nil {
		busy, err := p.runOnce(ctx)
		p.turned()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.pgDown.Failed(err)
		} else {
			p.pgDown.Recovered()
		}
		if busy && err == nil {
			continue // a full batch: there is more to do now
		}
		if !p.pause(ctx) {
			return
		}
	}
}

// pause waits the poll interval, or less when woken, and reports whether
// ctx is still alive.
func (p *poller) pause(ctx context.Context) bool {
	t := time.NewTimer(p.cfg.Interval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.wake:
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}

// runOnce does one round: take back stuck rows, make due the rows queued
// behind a backfill that has finished, sweep for gaps, claim and deliver
// due rows. busy says a full batch was found.
func (p *poller) runOnce(ctx context.Context) (busy bool, err error) {
	if err := p.rescueStuck(ctx); err != nil {
		return false, err
	}
	released, err := p.store.ReleaseBackfilled(ctx, p.cfg.BatchSize)
	if err != nil {
		return false, err
	}
	swept, err := p.sweep(ctx)
	if err != nil {
		return false, err
	}
	if !p.pub.Available() {
		return false, nil // Kafka is down: claim nothing
	}
	claimed, err := p.deliver(ctx)
	if err != nil {
		return false, err
	}
	return claimed == p.cfg.BatchSize || swept == p.cfg.BatchSize || released == int64(p.cfg.BatchSize), nil
}

func (p *poller) rescueStuck(ctx context.Context) error {
	rescued, err := p.store.RescueStuck(ctx, p.cfg.StuckThreshold, p.cfg.BatchSize, p.settle.def.MaxAttempts)
	p.metrics.Rescued.Add(float64(len(rescued)))
	for _, r := range rescued {
		if r.Status == string(store.StatusFailed) {
			logFailed(p.log, r.EventID, r.Topic, r.Reason, r.LastError, r.Attempts)
			continue
		}
		p.log.Warn("took back a row stuck in PROCESSING (counted as an attempt)",
			zap.String("event_id", r.EventID), zap.String("status", r.Status), zap.String("last_error", r.LastError))
	}
	return err
}

// sweep delivers, through PENDING rows, events that have no status row.
// It waits while a backfill runs: the backfill delivers exactly the events
// it would find, and publishes them without a PENDING row, so the two
// would send them twice.
func (p *poller) sweep(ctx context.Context) (int, error) {
	if paused, err := p.waitForStream(ctx); paused || err != nil {
		return 0, err
	}
	if running, err := p.store.BackfillRunning(ctx); running || err != nil {
		return 0, err
	}
	upper, recheckUpper, err := p.horizon.Look(ctx, p.store, p.cfg.GapGrace, p.cfg.GapRecheck)
	if err != nil {
		return 0, err
	}
	var found, inserted int
	if p.direct != nil && p.pub.Available() {
		found, inserted, err = p.sweepDirect(ctx, &p.cursor, upper)
	} else {
		if p.now().Before(p.sweepNext) {
			return 0, nil // pacing a walk of many windows
		}
		if why, _, _ := p.delay.hold(p.now()); why != "" {
			p.sweepNext = p.now().Add(p.cfg.Interval) // the stream first
			return 0, nil
		}
		var pause time.Duration
		found, inserted, pause, err = p.pacedRange(ctx, &p.cursor, upper)
		if found == p.cfg.BatchSize && inserted < found { // a full window with few gaps: more to walk, at a pace
			p.sweepNext = p.now().Add(max(p.cfg.Interval, pause))
			found = 0
		}
	}
	if err != nil {
		return 0, err
	}
	p.metrics.GapSweepBehind.Set(max(upper.Sub(p.cursor), 0).Seconds())
	mappedFound, mappedInserted, err := p.sweepMapped(ctx, p.mappedAt, func(int) time.Time { return upper })
	if err != nil {
		return 0, err
	}
	found, inserted = max(found, mappedFound), inserted+mappedInserted
	if inserted > 0 && p.slot != "" {
		p.log.Warn("gap sweep found committed events the stream never delivered; delivering them",
			zap.Int("events", inserted), zap.Time("up_to", p.cursor))
	}
	if p.cfg.GapRecheck > p.cfg.GapGrace && !p.now().Before(p.recheckNext) {
		// Only ground the first pass has walked: anything ahead is its job.
		found, late, pause, err := p.pacedRange(ctx, &p.recheck, minTime(recheckUpper, p.cursor))
		if err != nil {
			return 0, err
		}
		p.recheckNext = p.now().Add(max(p.cfg.Interval, time.Second))
		if found == p.cfg.BatchSize { // a full window: paced as the first pass is
			p.recheckNext = p.recheckNext.Add(pause)
		}
		_, mappedLate, err := p.sweepMapped(ctx, p.mappedRecheck,
			func(i int) time.Time { return minTime(recheckUpper, p.mappedAt[i].CreatedAt) })
		if err != nil {
			return 0, err
		}
		late += mappedLate
		if late > 0 {
			p.log.Warn("gap recheck found events the first pass had walked past (their created_at is older than "+
				"their commit by more than the sweep allows for); delivering them",
				zap.Int("events", late), zap.Time("up_to", p.recheck))
		}
	}
	return found, nil
}

// waitForStream reports whether the sweep should wait (stream mode) because
// the slot is more than GapMaxSlotLag behind: the stream will bring those
// events.
func (p *poller) waitForStream(ctx context.Context) (bool, error) {
	if p.slot == "" {
		return false, nil
	}
	lag, ok, err := p.store.SlotLag(ctx, p.slot)
	if err != nil {
		return false, err
	}
	if ok {
		p.metrics.SetSlotLag(p.slot, lag)
	}
	if ok && lag > p.cfg.GapMaxSlotLag {
		if !p.paused {
			p.log.Info("gap sweep paused while the stream catches up", zap.Int64("slot_lag_bytes", lag))
			p.paused = true
		}
		return true, nil
	}
	p.paused = false
	return false, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sweepWindowBatches bounds how many events one statement of the stream
// mode's sweep walks: sweepWindowBatches batches (100,000 at the default
// --poll-batch-size). A sweep checks every event of its range for a status
// row and almost all have one, so a statement over the whole of
// --gap-lookback walked every event of the last 24 hours: 2.9 million in
// 3.6 to 8.5 s here, 86 million at 1,000 events/s, past any statement
// timeout. A window of 100,000 takes a few hundred milliseconds.
//
// The stream's sweep is a safety net, not its delivery path: after a full
// window it waits sweepYield times the window's time (and at least
// --poll-interval) before the next, and while the stream's slowest events
// reach Kafka later than usual (streamDelay) it waits, as retention does,
// so that walking a day of events after a start does not take the cores
// from the stream.
const (
	sweepWindowBatches = 50
	sweepYield         = 4
)

// sweepRange runs the sweep from *cursor up to upper, through a window of at
// most sweepWindowBatches batches of events, and moves the cursor: to the
// last event found when the batch was full, else to the window's end. It
// returns the events found (a full batch while more lies ahead: the caller
// comes back at once) and the PENDING rows it inserted.
func (p *poller) sweepRange(ctx context.Context, cursor *time.Time, upper time.Time) (found, inserted int, err error) {
	end, windowed, err := p.store.SweepWindow(ctx, *cursor, upper, sweepWindowBatches*p.cfg.BatchSize)
	if err != nil {
		return 0, 0, err
	}
	pol := p.settle.def
	found, last, inserted, err := p.store.Sweep(ctx, *cursor, end, p.cfg.BatchSize, pol.MaxAttempts, pol.JSON())
	if err != nil {
		return 0, 0, err
	}
	p.metrics.GapSwept.Add(float64(inserted))
	switch {
	case found == p.cfg.BatchSize && last != nil:
		*cursor = *last
	case end.After(*cursor):
		*cursor = end
	}
	if windowed {
		found = p.cfg.BatchSize // more to walk now
	}
	return found, inserted, nil
}

// pacedRange is sweepRange as background work the stream's delay knows of
// (streamDelay.work), with the pause its pace asks for after a full
// window: sweepYield times the time it took.
func (p *poller) pacedRange(ctx context.Context, cursor *time.Time, upper time.Time) (found, inserted int, pause time.Duration, err error) {
	start := p.now()
	done := p.delay.work()
	found, inserted, err = p.sweepRange(ctx, cursor, upper)
	done()
	return found, inserted, sweepYield * p.now().Sub(start), err
}

// sweepMapped is sweepRange for the mapped tables with order columns, a
// page of each: cursors are their cursors, upper(i) the i-th's horizon. It
// returns the most rows a table's page found and the rows written.
func (p *poller) sweepMapped(ctx context.Context, cursors []store.BackfillCursor, upper func(i int) time.Time) (found, written int, err error) {
	for i, t := range p.mapped {
		if !t.Ordered() {
			continue
		}
		to := upper(i)
		if !to.After(cursors[i].CreatedAt) {
			continue
		}
		n, next, more, err := p.pender.walkMapped(ctx, p.store, p.store, t, cursors[i], to, p.cfg.BatchSize, p.mappedBytes, true)
		if err != nil {
			return found, written, err
		}
		p.metrics.GapSwept.Add(float64(n))
		written += n
		if more {
			cursors[i], found = next, p.cfg.BatchSize
		} else {
			cursors[i] = store.BackfillCursor{CreatedAt: to, Seq: -1}
		}
	}
	return found, written, nil
}

// sweepDirect is sweepRange for poll mode: it delivers the events it finds
// itself (direct), in one transaction that holds the sweep lock, so that
// two relays never deliver the same events; a relay that does not get the
// lock leaves the sweep to the one that has it, and its cursor where it
// was. It returns the events found and the rows written.
func (p *poller) sweepDirect(ctx context.Context, cursor *time.Time, upper time.Time) (found, written int, err error) {
	var last *time.Time
	var full bool
	ran, err := p.store.SweepLocked(ctx, func(tx *store.Store) error {
		end, windowed, err := tx.SweepWindow(ctx, *cursor, upper, p.cfg.BatchSize)
		if err != nil {
			return err
		}
		upper, full = end, windowed // more lies beyond the window
		page, err := tx.SweepEvents(ctx, *cursor, upper, p.cfg.BatchSize, p.maxBytes, p.hold)
		if err != nil || len(page.Values) == 0 {
			return err
		}
		found, last = len(page.Values), page.Last
		if page.Full {
			full = true
			upper = *last // the rest from there on
		}
		p.direct.reset() // the page says which keys wait
		n, err := p.direct.deliver(ctx, tx, page)
		written = int(n)
		return err
	})
	if err != nil || !ran {
		return 0, 0, err
	}
	p.metrics.GapSwept.Add(float64(written))
	if upper.After(*cursor) {
		*cursor = upper
	}
	if full {
		found = p.cfg.BatchSize // more to do now
	}
	return found, written, nil
}

// deliver claims due rows, publishes them in key order and records the
// outcomes.
func (p *poller) deliver(ctx context.Context) (int, error) {
	// The claim is never cancelled (its statement timeout bounds it): a
	// claim cancelled at stop could still commit on the server after this
	// instance handed back its rows (run), leaving them PROCESSING, and
	// their keys blocked, until the stuck threshold.
	claimed, err := p.store.Claim(context.WithoutCancel(ctx), p.cfg.InstanceID, p.cfg.BatchSize, p.hold)
	if err != nil || len(claimed.Rows) == 0 {
		return 0, err
	}
	p.metrics.Claimed.Add(float64(len(claimed.Rows)))
	b, err := loadBatch(claimed.Events, p.ce, len(claimed.Rows), p.now(), func(i int) [][]byte { return claimed.Rows[i].Values })
	if err != nil {
		return 0, err
	}
	for i, row := range claimed.Rows {
		if row.Mapped {
			fillFromCopy(&b.events[i], row.EventID, row.Copy, p.ce, tableNamed(p.tables, row.Copy))
		}
	}
	b.pending.Store(int32(len(b.events)) + 1)
	p.msgs = b.messages(p.msgs[:0])
	// A resend after the topic was created or the ACL granted must not
	// meet a remembered failure.
	p.pub.RefreshTopics(p.msgs)
	if err := b.publish(ctx, p.pub, p.msgs); err != nil {
		return len(b.events), nil // stopping: the rows are handed back
	}
	out := &store.Outcomes{}
	for i, row := range claimed.Rows {
		pol := p.settle.stored(row.RetryPolicy, row.MaxAttempts)
		o := p.settle.outcome(&b.events[i], row.Attempts, pol, row.PrevDelay)
		out.Add(o)
		count(p.tally, &b.events[i], o)
	}
	start := time.Now()
	if err := p.store.RecordOutcomes(context.WithoutCancel(ctx), p.cfg.InstanceID, out); err != nil {
		return len(b.events), err
	}
	p.metrics.Observe("record_outcomes", start)
	p.status.observe(time.Since(start))
	p.tally.Flush()
	return len(b.events), nil
}
