package relay

import (
	"cmp"
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

// Retention pacing: batches of retentionBatch events, a pause of at least
// retentionPause and retentionYield times the batch's own time between them
// (a busier database makes it slower), and a pass every retentionEvery.
// Batches are small because the stream's events that commit while one runs
// wait on it: at 1,000 a statement (20-45 ms each) the stream's p99 at 1,000
// events/s was 3 to 6 times its own even at the base pace, at 200 (4-8 ms)
// 1.5 times (the growth bench's runs 15 and 16, 5,000,000 rows) but 2.05
// times at 20,000,000 rows (run 18); at 100, 1.4 times at 5,000,000 rows
// (run 19), but at 20,000,000 within twice in two runs of five (runs 21
// to 31, after the cursor below; two of three with wal_compression=lz4;
// 50 a statement was worse: run 24). The
// floor of the pause keeps the base pace at most retentionBatch per
// retentionPause (10,000 a second), as 1,000 per 100 ms did.
//
// That pace deletes about 5,000 to 8,000 events a second on a busy 2-core
// machine: short of 10,000 events/s. So while it is behind (the events it
// deletes are more than retentionBehind older than the retention) and the
// stream's slowest events reach Kafka within one and a half times their
// usual delay (streamDelay.warm), it shortens the pause by
// retentionSpeedup every retentionSpeedupEvery (from the base to the
// fastest in 5 s: the stream's tail, its signal, is a second's slowest
// event, and a step every batch reached the fastest in under a second, before
// the tail could show it: strain of 65-160 ms within 2 s of each start in
// the growth bench's run 17), down to retentionYieldMin times the batch's
// time (and the floor with it, in proportion); once it has caught up, or as soon as
// the stream's tail is past that, or at the first sign of strain, it is
// back at retentionYield. At its fastest with no such check, batches of
// 1,000 took two thirds of a core and moved the stream's p99 to 2.8 times
// its own (run 11).
//
// While the stream's tail is warm, or after a back-off from strain, it goes
// no faster than keeping up (keepUpPeriod): retentionKeepUp times the events
// the stream carries a second, or as fast as the walked events were
// created, whichever is faster, even when that is slower than the base
// pace, and back to the base pace in steps of a tenth a quarter second once
// the tail is not warm. At the base pace a statement and its pause are a fifth of the
// time; at 1,000 events/s, 100 a statement of 5 ms, keeping up is a
// statement every 80 ms, a sixteenth. The base pace alone moved the
// stream's p99 at 1,000/s to 1.2 to 6.7 times its own while it deleted a
// backlog at 20,000,000 rows (the growth bench's runs 32 to 34), its tail
// past one and a half times its usual for most statements (run 15's log);
// keeping up deletes a day's events in a day and a backlog at a quarter of
// the stream's rate, faster only while the stream's tail allows.
//
// It also backs off while what it does shows on the stream: before each
// batch, while the slot is more than the gap sweep's GapMaxSlotLag behind
// the server's WAL, or the status statements' recent time is more than
// retentionSlower times their baseline (and above retentionLatencyFloor,
// below which a ratio is noise), or the slowest streamed events of the last
// second reach Kafka later than the floor of the last minutes (streamDelay)
// by more than that floor and more than delayRise, it deletes
// nothing and waits, from
// retentionBackoff doubling up to retentionBackoffCap, then resumes at its
// slowest pace once neither holds; strain of the status statements or the
// stream's delay that lasts retentionStrainMax it walks on through, no
// faster than keeping up (yield).
//
// A pass goes on from where the last one ended (outbox.retention_progress,
// recorded every retentionSaveEvery and when a walk ends, so a restart does
// too): the events the last pass deleted stay in the created_at index, dead,
// until a vacuum, and a walk from the oldest event visited them all in its
// first statement (162 ms after 500,000 deletes; the growth bench's stalls
// at 20,000,000 rows, run 20). The first pass retentionFullEvery after the
// last walk from the oldest began walks from the oldest again, for events
// sent since it passed them (FAILED, then resent).
const (
	retentionBatch        = 100
	retentionPause        = 10 * time.Millisecond
	retentionBackoff      = 100 * time.Millisecond
	retentionYield        = 4.0
	retentionYieldMin     = 0.5
	retentionSpeedup      = 0.9
	retentionSpeedupEvery = 250 * time.Millisecond
	retentionBehind       = 2 * retentionEvery
	retentionEvery        = time.Minute
	retentionFullEvery    = time.Hour
	retentionSaveEvery    = 5 * time.Second
	retentionSaveTimeout  = 5 * time.Second
	retentionSlower       = 3
	retentionLatencyFloor = 5 * time.Millisecond
	retentionBackoffCap   = 30 * time.Second
	retentionPastMax      = 10_000
	retentionKeepUp       = 1.25
	retentionKeepUpMax    = 5 * time.Second
	retentionHeldEvery    = 10 * time.Minute
	retentionStrainMax    = 5 * time.Minute
	retentionStrainClear  = time.Minute
)

// A walk goes through the events of one instant (one transaction's share
// its created_at) past the ones it keeps, an offset into that instant's
// events in the created_at index's order (retention.sql); each step reads
// the kept ones again before it gets to the others, so a walk through k
// kept events of one instant reads about k*k/(2*retentionBatch) rows: past
// retentionPastMax of them (500,000 reads, 100 statements) it steps past
// the rest of the instant, saying so, as a walk did after one batch before
// migration 22. A writer's transaction of a million events that all fail
// would otherwise hold every walk from the oldest event (hourly) there for
// some 5 billion reads.

// retentionPace is the pause between a walk's batches: yield times the
// batch's time, at least retentionPause scaled by yield/retentionYield; and
// while the stream's tail is warm, or a while after, no faster than keeping
// up with the stream (hold).
type retentionPace struct {
	yield float64
	// hold is the share of the keep-up period still held: 1 while the
	// stream's tail is warm (and after a back-off from strain), a tenth less
	// every retentionSpeedupEvery after, 0 once the pause it makes is no
	// longer than yield's.
	hold float64
	sped time.Time // when yield or hold last changed
}

func newRetentionPace() retentionPace { return retentionPace{yield: retentionYield} }

// after returns the pause after a batch that took took, ending at now, whose
// newest event was created at last (nil: none walked), in a walk up to
// cutoff, with the stream's tail past one and a half times its usual or not
// (warm), where keepUp is the time a batch may take, pause included, and
// still keep up (keepUpPeriod; 0: no such bound).
//
// While the tail is warm it holds that period, even when that is slower
// than the base pace, and lets go of it a tenth every retentionSpeedupEvery
// once the tail is not; it speeds up past the base pace while behind and
// the stream is not warm, a step every retentionSpeedupEvery at most, and
// is back at the base pace otherwise. It is never faster than it was
// before the period existed: holding only lengthens a pause.
func (p *retentionPace) after(now time.Time, took time.Duration, last *time.Time, cutoff time.Time, warm bool, keepUp time.Duration) time.Duration {
	behind := last != nil && cutoff.Sub(*last) > retentionBehind
	steps := int(now.Sub(p.sped) / retentionSpeedupEvery) // quarter seconds since the last change
	switch {
	case warm:
		p.yield, p.hold, p.sped = retentionYield, 1, now
	case p.hold > 0 && steps > 0:
		p.hold *= math.Pow(retentionSpeedup, float64(steps))
		p.sped = p.sped.Add(time.Duration(steps) * retentionSpeedupEvery)
	case p.hold > 0:
	case !behind:
		p.yield, p.sped = retentionYield, now
	case steps > 0:
		p.yield, p.sped = max(p.yield*retentionSpeedup, retentionYieldMin), now
	}
	floor := time.Duration(float64(retentionPause) * p.yield / retentionYield)
	pause := max(floor, time.Duration(p.yield*float64(took)))
	if held := time.Duration(p.hold*float64(keepUp)) - took; held > pause {
		return held
	}
	p.hold = 0
	return pause
}

// holding reports whether the last pause was lengthened to keep to the
// stream's pace.
func (p *retentionPace) holding() bool { return p.hold > 0 }

// keepUpPeriod is the time a batch of walked events, created over span
// (the created_at of the last one walked before it to its newest), may
// take, pause included, for retention to walk retentionKeepUp times the
// events the stream carries a second (rate) and retentionKeepUp times as
// fast as those events were created: whichever is faster, so that it
// neither falls behind the events that reach the cut-off (created at
// another rate than the stream's now) nor the stream; at most
// retentionKeepUpMax. A rate of 0 (an idle stream, or none followed) or a
// span of 0 (not known: the first batch of a walk from the oldest event;
// or one instant's events) bounds nothing; 0 when neither bounds it.
func keepUpPeriod(walked int, rate float64, span time.Duration) time.Duration {
	if walked <= 0 || (rate <= 0 && span <= 0) {
		return 0
	}
	period := retentionKeepUpMax
	if rate > 0 {
		period = min(period, time.Duration(float64(walked)/(retentionKeepUp*rate)*float64(time.Second)))
	}
	if span > 0 {
		period = min(period, time.Duration(float64(span)/retentionKeepUp))
	}
	return period
}

// retainer deletes SENT events older than the retention with their delivery
// rows. One relay at a time does it: the one holding the retention advisory
// lock on its own connection.
type retainer struct {
	dbURL      string
	timeout    time.Duration // of the lock connection's statements
	tcpTimeout time.Duration // the lock connection's TCP user timeout (pgdial)
	store      *store.Store
	age        time.Duration
	log        *zap.Logger
	deleted    func(n int64) // counts deleted events (metrics)
	lock       *pgx.Conn     // holds the advisory lock while this relay leads
	// compress: the wal_compression its steps set for their own
	// transactions ("": the server's own), found as it takes the lock.
	compress string

	// What it backs off from: the lag of slot (empty in poll mode: none)
	// past maxLag bytes, and the status statements' time (nil: not read).
	slot   string
	maxLag int64
	status *statusLatency
	// delay: how late streamed events reach Kafka (nil: not read).
	delay *streamDelay

	heldSaid time.Time // when it last said it keeps to the stream's pace
	// holderSaid: when it last warned that a session not a relay's holds
	// the lock.
	holderSaid time.Time
	// strainedSince: when the stream's present strain began (zero: none),
	// strainSeen: when it was last seen; walkingOn: past retentionStrainMax
	// of it, walking on, said at strainSaid.
	strainedSince, strainSeen, strainSaid time.Time
	walkingOn                             bool

	// Tests shrink these; zero: retentionBatch, retentionPastMax,
	// retentionStrainMax and outage.Sleep.
	batch     int
	pastMax   int64
	strainMax time.Duration
	sleep     func(ctx context.Context, d time.Duration) bool
}

// run makes a pass every retentionEvery until ctx ends.
func (r *retainer) run(ctx context.Context) {
	defer r.release()
	for {
		if r.lead(ctx) {
			r.pass(ctx)
		}
		if !r.wait(ctx, retentionEvery) {
			return
		}
	}
}

// lead reports whether this relay holds the retention lock, taking it if
// it is free.
func (r *retainer) lead(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.lock != nil {
		if err := r.lock.Ping(ctx); err == nil {
			return true
		}
		r.release() // the connection, and with it the lock, is gone
	}
	conn, err := pgdial.Connect(ctx, r.dbURL, r.tcpTimeout)
	if err != nil {
		return false // PostgreSQL is down: the poller and the stream say so
	}
	ok, err := store.TryRetentionLock(ctx, conn)
	if err == nil && !ok {
		r.sayHolder(ctx, conn)
	}
	if err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		return false
	}
	r.lock = conn
	// Named, for whoever reads pg_stat_activity (and sayHolder's warning).
	_, _ = conn.Exec(ctx, `SET application_name = 'outbox-relay retention'`)
	r.log.Info("this relay runs retention", zap.Duration("retention", r.age))
	r.compress = ""
	if c, err := store.WALCompression(ctx, conn); err == nil && c == "off" {
		r.compress, err = store.RetentionWALCompression(ctx, conn)
		switch {
		case err != nil:
			r.log.Warn("retention: could not try compressing its own WAL", zap.Error(err))
		case r.compress == "":
			r.log.Info(walCompressionHint, zap.String("wal_compression", c))
		default:
			r.log.Info("retention: compresses the WAL of its own deletes (wal_compression for its own transactions; the server's is off)",
				zap.String("wal_compression", r.compress))
		}
	}
	return true
}

// sayHolder warns, once and then every retentionHeldEvery, when the
// session that holds the retention lock is not a relay's: an advisory lock
// takes no privilege, so any role that may connect (a writer of
// outbox.events) can hold it, and while it does no relay deletes and the
// outbox grows. Another relay holding it says nothing.
func (r *retainer) sayHolder(ctx context.Context, conn *pgx.Conn) {
	h, found, err := store.RetentionLockHolder(ctx, conn)
	if err != nil || !found || h.Relay || !sayAgain(&r.holderSaid, time.Now()) {
		return
	}
	r.log.Warn("retention: a session that is not a relay's holds retention's lock, so no relay deletes old events "+
		"while it does; SELECT pg_terminate_backend(pid) ends it (pid 0: a prepared transaction, which ROLLBACK PREPARED ends)",
		zap.Int32("pid", h.PID), zap.String("user", termsafe.String(h.User)),
		zap.String("application_name", termsafe.String(h.App)))
}

// sayAgain reports whether a line last said at *last is due again at now
// (never said, or retentionHeldEvery ago), and marks it said then.
func sayAgain(last *time.Time, now time.Time) bool {
	if !last.IsZero() && now.Sub(*last) < retentionHeldEvery {
		return false
	}
	*last = now
	return true
}

// walCompressionHint is said once a relay starts running retention on a
// server with wal_compression off: four fifths of a deleted event's WAL is
// the page images a checkpoint forces (1,076 bytes an event on the growth
// bench's rows, 360 with lz4; pg_waldump --stats: 79 % page images;
// docs/performance.md).
const walCompressionHint = "retention: wal_compression is off: each deleted event writes about 1 KB of WAL, " +
	"most of it page images, which wal_compression=lz4 (PostgreSQL 15 and newer; on before) compresses " +
	"(a third of the bytes on the bench's events; docs/performance.md, Recommended settings); " +
	"or let retention compress its own: GRANT SET ON PARAMETER wal_compression TO outbox_relay " +
	"(PostgreSQL 15 and newer; outbox-relay migrate does, run by a superuser)"

func (r *retainer) release() {
	r.strainedSince, r.walkingOn = time.Time{}, false // another relay may have deleted meanwhile
	if r.lock != nil {
		// Unlocked first, so the lock is free when release returns (a broken
		// connection has lost it already; the error says no more than that).
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(r.timeout, retentionSaveTimeout))
		_ = store.ReleaseRetentionLock(ctx, r.lock)
		cancel()
		r.lock.Close(context.Background())
		r.lock = nil
	}
}

// pass walks the events older than the retention, oldest first, from
// where the last pass ended, and deletes the SENT ones, pausing between
// batches so that it never competes with delivery.
func (r *retainer) pass(ctx context.Context) {
	cutoff := time.Now().Add(-r.age)
	total := r.resume(ctx, false, cutoff) + r.resume(ctx, true, cutoff)
	if total > 0 {
		r.log.Info("retention: deleted delivered events with their delivery rows",
			zap.Int64("events", total), zap.Time("created_before", cutoff))
	}
}

// resume walks over outbox.events or, with mapped, over the status rows of
// mapped events, from where the last walk ended (outbox.retention_progress),
// or from the oldest event once the last walk from there began
// retentionFullEvery ago, and records how far it gets as it goes; it
// returns how many it deleted.
func (r *retainer) resume(ctx context.Context, mapped bool, cutoff time.Time) int64 {
	p, ok, err := r.store.RetentionProgress(ctx, mapped)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("retention: trying again at the next pass", zap.Error(err))
		}
		return 0
	}
	if now := time.Now(); !ok || now.Sub(p.FullWalkAt) >= retentionFullEvery || now.Before(p.FullWalkAt) {
		p = store.RetentionProgress{FullWalkAt: now}
	}
	saved := time.Now()
	save := func(to store.RetentionCursor, done bool) {
		if !done && time.Since(saved) < retentionSaveEvery {
			return
		}
		p.Walked, saved = to, time.Now()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.timeout, retentionSaveTimeout))
		defer cancel()
		if err := r.store.SaveRetentionProgress(sctx, mapped, p); err != nil && ctx.Err() == nil {
			r.log.Warn("retention: the next pass may walk again what this one did", zap.Error(err))
		}
	}
	return r.walk(ctx, mapped, p.Walked, cutoff, save)
}

// walk is one pass over outbox.events or, with mapped, over the status rows
// of mapped events, from the cursor from on; it returns how many it
// deleted. It calls save (if not nil) with where it has got to after each
// batch, and with done once it ends.
func (r *retainer) walk(ctx context.Context, mapped bool, from store.RetentionCursor, cutoff time.Time, save func(to store.RetentionCursor, done bool)) int64 {
	if save == nil {
		save = func(store.RetentionCursor, bool) {}
	}
	defer func() { save(from, true) }()
	var total int64
	batch := cmp.Or(r.batch, retentionBatch)
	pace := newRetentionPace()
	for ctx.Err() == nil {
		ok, strained := r.yield(ctx)
		if !ok {
			break
		}
		if strained {
			pace = newRetentionPace()
			pace.hold, pace.sped = 1, time.Now() // what strained the stream may still warm it
		}
		prev := from.At
		start := time.Now()
		done := r.delay.work()
		walked, deleted, to, err := r.store.RetentionStep(ctx, mapped, from, cutoff, batch, r.compress)
		done()
		if err != nil && r.compress != "" && pgdial.IsDenied(err) {
			r.log.Warn("retention: may no longer set wal_compression for its own deletes (SET ON PARAMETER revoked?); "+
				"walking on with the server's", zap.Error(err))
			r.compress = ""
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("retention: deleting delivered events failed; trying again at the next pass", zap.Error(err))
			}
			break
		}
		total += deleted
		r.deleted(deleted)
		from = r.pastKept(to)
		if walked < batch {
			break
		}
		save(from, false)
		now := time.Now()
		rate := r.delay.rate(now)
		var span time.Duration // from the last event walked before (none: the oldest's walk)
		if !prev.IsZero() {
			span = to.At.Sub(prev)
		}
		keepUp := keepUpPeriod(walked, rate, span)
		pause := pace.after(now, now.Sub(start), &to.At, cutoff, r.delay.warm(now), keepUp)
		if pace.holding() && sayAgain(&r.heldSaid, now) {
			r.log.Info("retention: walking no faster than keeping up with the stream while it shows strain or its slowest events are late",
				zap.Float64("stream_events_per_second", rate), zap.Duration("batch_period", keepUp), zap.Time("walked_to", to.At))
		}
		if !r.wait(ctx, pause) {
			break
		}
	}
	return total
}

// pastKept returns c, or the instant after c's when c is past more kept
// events of its instant than a walk reads through (retentionPastMax),
// saying so.
func (r *retainer) pastKept(c store.RetentionCursor) store.RetentionCursor {
	limit := cmp.Or(r.pastMax, retentionPastMax)
	if c.Past <= limit {
		return c
	}
	r.log.Warn("retention: stepping past an instant of more kept events than it walks through; "+
		"the SENT events created at it after these are not deleted by retention (outbox-relay purge deletes them)",
		zap.Time("created_at", c.At), zap.Int64("kept", c.Past), zap.Int64("limit", limit))
	return store.RetentionCursor{At: c.At.Add(time.Microsecond)}
}

// yield waits, doubling its wait from retentionBackoff up to
// retentionBackoffCap, while the stream shows strain (strain), logging once
// when it starts and once when it ends; it reports false when ctx ends,
// and whether it waited (or walks on strained: below).
//
// A strain that lasts retentionStrainMax does not hold retention for ever:
// slow streamed events or status statements are what a writer of the
// outbox can cause, by sending slow events most seconds, and a retention
// that waited them out would let the outbox grow without end. Past that it
// walks on, no faster than keeping up (the walk holds its period when
// yield reports it waited), saying so; a slot behind is waited out however
// long it lasts (the stream's own trouble, which retention's WAL adds to,
// and which outbox_relay_slot_lag_bytes shows).
func (r *retainer) yield(ctx context.Context) (ok, waited bool) {
	var wait time.Duration
	for {
		why, fields := r.strain(ctx)
		now := time.Now()
		if r.strained(now, why) {
			if !r.walkingOn || now.Sub(r.strainSaid) >= retentionHeldEvery {
				r.walkingOn, r.strainSaid = true, now
				r.log.Warn("retention: the stream has shown strain too long to wait for; walking on no faster than keeping up with it, "+
					"so that the outbox does not grow without end ("+why+")", append(fields, zap.Duration("strained_for", now.Sub(r.strainedSince)))...)
			}
			return ctx.Err() == nil, true
		}
		if why == "" {
			if wait > 0 {
				r.log.Info("retention: deleting at its pace again")
			}
			return ctx.Err() == nil, wait > 0
		}
		if wait == 0 {
			r.log.Info("retention: backing off while "+why, fields...)
		}
		wait = min(max(2*wait, retentionBackoff), retentionBackoffCap)
		if why == delayUnknown {
			wait = time.Second // quiet seconds make a floor within seconds: look every second, no back-off
		}
		if !r.wait(ctx, wait) {
			return false, true
		}
	}
}

// strained follows how long the stream has shown strain of the kind a
// writer can cause (why: the status statements' time or the stream's delay)
// at now, and reports whether that has lasted retentionStrainMax. A strain
// is over once none has been seen for retentionStrainClear, not at the
// first reading without one: slow events in most seconds leave some
// seconds clear, and a count that began again at each of them never got
// to its end. A slot behind, or a stream whose usual delay is not known,
// ends the count: those are waited out however long they last.
func (r *retainer) strained(now time.Time, why string) bool {
	switch why {
	case slotBehind, delayUnknown:
		r.strainedSince, r.walkingOn = time.Time{}, false
		return false
	case "":
		if !r.strainedSince.IsZero() && now.Sub(r.strainSeen) >= retentionStrainClear {
			if r.walkingOn {
				r.log.Info("retention: the stream's strain is over", zap.Duration("strained_for", r.strainSeen.Sub(r.strainedSince)))
			}
			r.strainedSince, r.walkingOn = time.Time{}, false
		}
		return false
	}
	r.strainSeen = now
	if r.strainedSince.IsZero() {
		r.strainedSince = now
	}
	return now.Sub(r.strainedSince) >= cmp.Or(r.strainMax, retentionStrainMax)
}

// slotBehind is why retention waits while the slot is behind.
const slotBehind = "the slot is behind"

// strain says why retention should wait now, if it should: the slot's lag
// past maxLag, or the status statements' recent time past retentionSlower
// times their baseline. A lag that cannot be read does not stop it (the
// poller reports PostgreSQL's state).
func (r *retainer) strain(ctx context.Context) (string, []zap.Field) {
	if r.slot != "" && r.maxLag > 0 {
		if lag, ok, err := r.store.SlotLag(ctx, r.slot); err == nil && ok && lag > r.maxLag {
			return slotBehind, []zap.Field{zap.Int64("slot_lag_bytes", lag), zap.Int64("limit_bytes", r.maxLag)}
		}
	}
	if r.status != nil {
		if recent, base := r.status.read(); recent > retentionLatencyFloor && recent > retentionSlower*base {
			return "the status statements are slower", []zap.Field{zap.Duration("recent", recent), zap.Duration("baseline", base)}
		}
	}
	switch why, recent, floor := r.delay.hold(time.Now()); why {
	case delayLate:
		return why, []zap.Field{zap.Duration("recent", recent), zap.Duration("floor", floor)}
	case delayUnknown:
		return why, nil
	}
	return "", nil
}

// wait pauses for d, reporting false when ctx ends first.
func (r *retainer) wait(ctx context.Context, d time.Duration) bool {
	if r.sleep != nil {
		return r.sleep(ctx, d)
	}
	return outage.Sleep(ctx, d)
}
