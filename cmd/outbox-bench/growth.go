package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/retry"
)

// Growth is what the growth phase measured with outbox.deliveries (and the
// events behind it) at one size, in one run.
type Growth struct {
	Rows        int     `json:"rows"`         // status rows (and events) before the size's measurements
	FillSeconds float64 `json:"fill_seconds"` // writing them, with VACUUM ANALYZE
	// The table sizes after the fill (pg_total_relation_size, which
	// counts TOAST and indexes, and pg_indexes_size).
	DeliveriesMiB        float64 `json:"deliveries_total_mib"`
	DeliveriesIndexesMiB float64 `json:"deliveries_indexes_mib"`
	EventsMiB            float64 `json:"events_total_mib"`
	EventsIndexesMiB     float64 `json:"events_indexes_mib"`
	// The relay's drain of --events new events, growthStreamRuns times:
	// the median rate, each run's, and the relay's peak RSS.
	DrainPerS   float64   `json:"drain_events_per_s"`
	DrainRuns   []float64 `json:"drain_events_per_s_runs"`
	DrainRSSMiB float64   `json:"drain_relay_peak_rss_mib"`
	// The stream at 1,000 events/s (no retention to do), growthStreamRuns
	// runs, each before one of the retention runs below: the p50 and p99
	// of their events together (each run's p99 in StreamP99Runs), and the
	// relay's peak RSS over them.
	StreamP50ms   float64   `json:"stream_p50_ms"`
	StreamP99ms   float64   `json:"stream_p99_ms"`
	StreamP99Runs []float64 `json:"stream_p99_ms_runs"`
	StreamRSSMiB  float64   `json:"stream_relay_peak_rss_mib"`
	// Those runs start once the relay's first gap sweep after its start
	// has caught up (FirstSweepSeconds, the longest of them, at the
	// relay's pace); one more run starts with the relay, while its first
	// sweep walks: its p50 and p99.
	FirstSweepSeconds    float64 `json:"relay_first_sweep_s"`
	StreamDuringSweepP50 float64 `json:"stream_p50_ms_first_sweep"`
	StreamDuringSweepP99 float64 `json:"stream_p99_ms_first_sweep"`
	// ClaimMs is the median time of a poll-only claim of 200 due rows.
	ClaimMs float64 `json:"claim_p50_ms"`
	// The gap sweep of --gap-lookback (24 h: what a relay's first sweep
	// after a start walks, in windows of growthSweepWindow events, one
	// statement pair each, as the stream mode's sweep does), its longest
	// window, and the events it walked.
	SweepMs        float64 `json:"gap_sweep_ms"`
	SweepLongestMs float64 `json:"gap_sweep_longest_window_ms"`
	SweepRows      int     `json:"gap_sweep_rows"`
	// Retention: a relay with --retention 6d deleting the oldest day of
	// rows while the stream runs at 1,000/s, then one with 5d deleting the
	// next day, then 4d (growthStreamRuns runs, each with a day to delete
	// throughout): the events deleted and the rate over them all, the p50
	// and p99 of the runs' events together (each run's p99 in
	// RetentionP99Runs).
	RetentionDeleted int       `json:"retention_deleted"`
	RetentionPerS    float64   `json:"retention_deleted_per_s"`
	RetentionP50ms   float64   `json:"stream_p50_ms_retaining"`
	RetentionP99ms   float64   `json:"stream_p99_ms_retaining"`
	RetentionP99Runs []float64 `json:"stream_p99_ms_retaining_runs"`
	// RetentionMeasuredRuns: the events each run deleted in its measured
	// window (none: that run measured the stream alone).
	RetentionMeasuredRuns []int `json:"retention_deleted_while_measured_runs"`
	// RetentionLate: events of that stream not at the consumer a minute
	// after the writer stopped (their latencies are then not known).
	RetentionLate int `json:"stream_late_retaining,omitempty"`
	// The console's overview and FAILED pages (median of --console-runs).
	OverviewMs float64 `json:"console_overview_p50_ms"`
	FailedMs   float64 `json:"console_failed_p50_ms"`
	// Interleaved: the stream with and without deletes at retention's
	// keep-up pace, block by block in one run (interleave.go); absent
	// with --growth-interleaved 0.
	Interleaved *Interleaved `json:"interleaved,omitempty"`
	// VersusEmpty: the stream with its events written to this size's
	// database (on) and to an empty one (off), block by block in one run
	// (versus.go); absent with --growth-versus-empty 0.
	VersusEmpty *Blocks `json:"versus_empty,omitempty"`
}

// growthSpan is how far back the growth phase's rows reach: an hour short
// of --retention's default (7 days), so that retention at its default finds
// nothing to do during the size's measurements, and about a day of them
// (a seventh) is older than growthRetention.
const (
	growthSpan      = 7*24*time.Hour - time.Hour
	growthRetention = 6 * 24 * time.Hour
	growthFillBatch = 1000000
	growthClaims    = 10  // claims timed per size
	growthClaimRows = 200 // rows per claim
	// Runs of the drain and of the stream at 1,000/s, with and without
	// retention, per size: a drain's rate moves by a fifth and the stream's
	// p99 by several times between runs on a shared machine.
	growthStreamRuns = 3
	// The relay's sweep at the default --poll-batch-size: windows of 50
	// batches of 2,000 (relay.sweepWindowBatches).
	growthSweepBatch  = 2000
	growthSweepWindow = 50 * growthSweepBatch
)

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--growth: %q is not a number of rows", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// growthPhase measures, for each size of --growth, the relay and the
// database with outbox.deliveries and outbox.events filled to that size, as
// a week of traffic would have left them: see Growth.
func (b *bench) growthPhase(ctx context.Context) error {
	sizes, err := parseSizes(b.o.growth)
	if err != nil {
		return err
	}
	for _, n := range sizes {
		g, err := b.growAt(ctx, n)
		if err != nil {
			return fmt.Errorf("growth at %d rows: %w", n, err)
		}
		b.growth = append(b.growth, g)
		if err := b.writeResults(); err != nil { // what is measured survives a later size's failure
			return err
		}
	}
	return nil
}

func (b *bench) growAt(ctx context.Context, n int) (Growth, error) {
	g := Growth{Rows: n}
	t0 := time.Now()
	if err := b.fill(ctx, n); err != nil {
		return g, err
	}
	g.FillSeconds = time.Since(t0).Seconds()
	if err := b.pool.QueryRow(ctx, `SELECT pg_total_relation_size('outbox.deliveries') / 1048576.0, pg_indexes_size('outbox.deliveries') / 1048576.0,
		pg_total_relation_size('outbox.events') / 1048576.0, pg_indexes_size('outbox.events') / 1048576.0`).Scan(
		&g.DeliveriesMiB, &g.DeliveriesIndexesMiB, &g.EventsMiB, &g.EventsIndexesMiB); err != nil {
		return g, err
	}
	fmt.Fprintf(os.Stderr, "growth: %d rows in %.0f s; deliveries %.0f MiB (indexes %.0f), events %.0f MiB (indexes %.0f)\n",
		n, g.FillSeconds, g.DeliveriesMiB, g.DeliveriesIndexesMiB, g.EventsMiB, g.EventsIndexesMiB)

	var drains []Result
	for range growthStreamRuns {
		end, err := b.backlog(ctx, b.o.events, "bench_relay")
		if err != nil {
			return g, err
		}
		drain, err := b.relayDrain(ctx, b.o.events, end, 0)
		if err != nil {
			return g, err
		}
		drains = append(drains, drain)
	}
	drain := median(drains)
	g.DrainPerS, g.DrainRuns, g.DrainRSSMiB = drain.EventsPerS, drain.RunsPerS, drain.RSSMiB

	during, _, err := b.streamAt1000(ctx, false)
	if err != nil {
		return g, err
	}
	g.StreamDuringSweepP50, g.StreamDuringSweepP99 = during.P50ms, during.P99ms
	if g.ClaimMs, err = b.timeClaims(ctx); err != nil {
		return g, err
	}
	if g.SweepMs, g.SweepLongestMs, g.SweepRows, err = b.timeSweep(ctx); err != nil {
		return g, err
	}
	if g.OverviewMs, g.FailedMs, err = b.timeGrowthConsole(ctx); err != nil {
		return g, err
	}
	if err := b.growRetention(ctx, &g); err != nil {
		return g, err
	}
	if err := b.growInBlocks(ctx, &g); err != nil {
		return g, err
	}
	return g, nil
}

// growRetention runs the stream at 1,000/s without retention and while a
// relay's retention deletes, growthStreamRuns times each, and sets the
// size's stream and retention figures.
func (b *bench) growRetention(ctx context.Context, g *Growth) error {
	// The stream without retention and while it deletes, in turn, so
	// that neither has the machine's quieter minutes to itself (with all
	// the runs without it first, they ran in the minutes after the fill).
	// Its log at info says when retention backs off.
	var streams, rets []Result
	var secs float64
	for i := range growthStreamRuns {
		stream, swept, err := b.streamAt1000(ctx, true)
		if err != nil {
			return err
		}
		streams = append(streams, stream)
		g.StreamRSSMiB = max(g.StreamRSSMiB, stream.RSSMiB)
		g.FirstSweepSeconds = max(g.FirstSweepSeconds, swept.Seconds())

		ret, deleted, s, err := b.streamWhileRetaining(ctx, growthRetention-time.Duration(i)*24*time.Hour, "--log-level", "info")
		if err != nil && !errors.Is(err, errLate) {
			return err
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "growth: %v\n", err)
		}
		rets = append(rets, ret)
		g.RetentionMeasuredRuns = append(g.RetentionMeasuredRuns, ret.DeletedMeasured)
		g.RetentionDeleted, g.RetentionLate, secs = g.RetentionDeleted+deleted, g.RetentionLate+ret.Late, secs+s
	}
	g.StreamP50ms, g.StreamP99ms = pooled(streams)
	g.StreamP99Runs = p99s(streams)
	g.RetentionPerS = float64(g.RetentionDeleted) / secs
	g.RetentionP50ms, g.RetentionP99ms = pooled(rets)
	g.RetentionP99Runs = p99s(rets)
	fmt.Fprintf(os.Stderr, "growth: stream p99 without retention %v ms, while it deletes %v ms (%d deleted, %.0f/s; in the measured windows %v)\n",
		g.StreamP99Runs, g.RetentionP99Runs, g.RetentionDeleted, g.RetentionPerS, g.RetentionMeasuredRuns)
	return nil
}

// growInBlocks runs the size's interleaved runs: the stream with deletes at
// retention's keep-up pace and without (--growth-interleaved), and with
// its events to this size's database and to an empty one
// (--growth-versus-empty).
func (b *bench) growInBlocks(ctx context.Context, g *Growth) error {
	if b.o.growthInterleaved > 0 {
		il, err := b.streamInterleaved(ctx, b.o.growthInterleaved)
		if err != nil {
			return fmt.Errorf("the interleaved run: %w", err)
		}
		g.Interleaved = &il
		fmt.Fprintf(os.Stderr, "growth: interleaved, stream p99 %.1f ms in blocks deleting (%d deleted, %.0f/s, %d of %d statements over %v), %.1f ms in blocks not (%.1f right after a block deleting, %.1f after one not): %.2f times; the median block's %.1f and %.1f ms, %.2f times; blocks deleting %v, not %v\n",
			il.OnP99ms, il.Deleted, il.DeletedPerS, il.SlowSteps, il.Steps, interleaveEvery, il.OffP99ms, il.OffAfterOnP99ms, il.OffAfterOffP99ms,
			il.Ratio(), il.OnMedianBlockP99ms, il.OffMedianBlockP99ms, il.MedianRatio(), il.OnBlockP99ms, il.OffBlockP99ms)
	}
	if b.o.growthVersusEmpty > 0 {
		vs, err := b.streamVersusEmpty(ctx, b.o.growthVersusEmpty)
		if err != nil {
			return fmt.Errorf("the run against an empty database: %w", err)
		}
		g.VersusEmpty = &vs
		fmt.Fprintf(os.Stderr, "growth: against an empty database, stream p50/p99 %.2f/%.1f ms to %d rows, %.2f/%.1f ms to none: p99 %.2f times; the median block's p99 %.1f and %.1f ms, %.2f times; blocks to %d rows %v, to none %v\n",
			vs.OnP50ms, vs.OnP99ms, g.Rows, vs.OffP50ms, vs.OffP99ms, vs.Ratio(), vs.OnMedianBlockP99ms, vs.OffMedianBlockP99ms, vs.MedianRatio(),
			g.Rows, vs.OnBlockP99ms, vs.OffBlockP99ms)
	}
	return nil
}

// pooled returns the p50 and p99 in ms of the runs' events together: a
// 10 s run's p99 is its 100th slowest event, which one stall of the
// machine moves by several times; three runs' 300th is steadier than the
// median of their three.
func pooled(runs []Result) (p50, p99 float64) {
	var all []time.Duration
	for _, r := range runs {
		all = append(all, r.latencies...)
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	return quantileMs(all, 0.50), quantileMs(all, 0.99)
}

func p99s(runs []Result) []float64 {
	var out []float64
	for _, r := range runs {
		out = append(out, r.P99ms)
	}
	return out
}

// fill empties the outbox and writes n events with their status rows,
// created evenly over the growthSpan up to now, in time order (ids
// time-ordered, as outbox.uuid_v7 makes them), --growth-failed % FAILED
// (with keys: as the relay writes them), the rest SENT
// with the columns the stream writes; then VACUUM ANALYZE, as autovacuum
// would have done to a table of that age, and a CHECKPOINT.
func (b *bench) fill(ctx context.Context, n int) error {
	for _, s := range []string{"bench_relay", "bench_steady", "bench_decode"} {
		b.dropSlot(ctx, s) // no slot decodes the fill
	}
	// Where retention's walks got to goes with the rows: left from a
	// smaller size, the next size's first retention run went on from
	// there, past most of its oldest day (run 28 at 20,000,000 rows).
	if err := b.exec(ctx, `TRUNCATE outbox.events, outbox.retention_progress CASCADE`); err != nil {
		return err
	}
	policy := retry.Policy{}.WithDefaults().JSON()
	failEvery := 0 // every failEvery-th row FAILED (0: none)
	if b.o.growthFailed > 0 {
		failEvery = int(math.Round(100 / b.o.growthFailed))
	}
	fmt.Fprintf(os.Stderr, "growth: writing %d events and status rows (every %dth FAILED)\n", n, failEvery)
	for from := 1; from <= n; from += growthFillBatch {
		to := min(from+growthFillBatch-1, n)
		err := b.exec(ctx, `WITH ev AS (
			INSERT INTO outbox.events (id, topic, key, payload, event_type, created_at)
			SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
			              PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
			       $1, 'customer-' || (i % 1000),
			       jsonb_build_object('order_id', i, 'customer', 'customer-' || (i % 1000),
			                          'amount', round((random() * 1000)::numeric, 2), 'currency', 'EUR', 'note', repeat('x', 380)),
			       'order.created', at
			FROM generate_series($2::int, $3::int) i,
			     LATERAL (SELECT now() - make_interval(secs => $5::float8) + i * make_interval(secs => $5::float8 / ($4::int + 1))) AS t(at)
			RETURNING id, topic, key, created_at, seq)
			INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, kafka_partition, kafka_offset,
			                               created_at, updated_at, sent_at, retry_policy, seq,
			                               failure_reason, last_error, topic, key, commit_lsn, tx_position)
			SELECT id, CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN 'FAILED' ELSE 'SENT' END, 1, created_at,
			       CASE WHEN NOT ($7::int > 0 AND seq % greatest($7::int, 1) = 0) THEN seq % 3 END, CASE WHEN NOT ($7::int > 0 AND seq % greatest($7::int, 1) = 0) THEN seq END,
			       created_at, created_at, CASE WHEN NOT ($7::int > 0 AND seq % greatest($7::int, 1) = 0) THEN created_at END, $6::jsonb, seq,
			       CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN 'MESSAGE_TOO_LARGE' END, CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN 'kafka: message was too large' END,
			       CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN topic END, CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN key END,
			       CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN '0/0'::pg_lsn END, CASE WHEN $7::int > 0 AND seq % greatest($7::int, 1) = 0 THEN 0 END
			FROM ev ORDER BY created_at`, b.o.topic, from, to, n, growthSpan.Seconds(), policy, failEvery)
		if err != nil {
			return fmt.Errorf("filling: %w", err)
		}
	}
	// The CHECKPOINT writes back what the fill and the VACUUM dirtied
	// (every page: hint bits, all-visible): left to the checkpointer, that
	// I/O slowed the first measurements (the stream at 1,000/s: p50 824 ms
	// at 5,000,000 rows).
	for _, s := range []string{`VACUUM ANALYZE outbox.events`, `VACUUM ANALYZE outbox.deliveries`, `CHECKPOINT`} {
		if err := b.exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// streamAt1000 runs the stream at 1,000 events/s on a fresh slot, as the
// steady phase does (with no rows old enough for --retention): with
// afterSweep, once the relay's first gap sweep has caught up (and it
// returns how long that took from the relay's start), measured after the
// warm-up of a run while retention deletes; else from its start.
func (b *bench) streamAt1000(ctx context.Context, afterSweep bool) (Result, time.Duration, error) {
	if err := b.freshSlot(ctx, "bench_steady"); err != nil {
		return Result{}, 0, err
	}
	defer b.dropSlot(ctx, "bench_steady")
	if err := b.trimTopic(ctx); err != nil {
		return Result{}, 0, err
	}
	defer b.noteServerWork(ctx, "stream run")()
	if afterSweep && b.o.trace != "" { // as the retention runs it is set against keep
		b.activity++
		defer b.sampleActivity(ctx, fmt.Sprintf("%s-activity-%d.csv", b.o.trace, b.activity))()
	}
	t0 := time.Now()
	r, err := b.startRelay("--slot", "bench_steady")
	if err != nil {
		return Result{}, 0, err
	}
	if err := b.untilStreaming(ctx, "the relay"); err != nil {
		_ = r.stop()
		return Result{}, 0, err
	}
	var swept time.Duration
	if afterSweep {
		if swept, err = r.untilSwept(ctx, t0); err != nil {
			_ = r.stop()
			return Result{}, 0, err
		}
		fmt.Fprintf(os.Stderr, "growth: the relay's first gap sweep caught up %.1f s after its start\n", swept.Seconds())
		// The runs it is set against, while retention deletes, measure
		// from 15 s into the stream: so does this one, or its first
		// seconds (connections, caches) would count here alone.
		defer b.warmAtLeast(retentionWarmup)()
	}
	fmt.Fprintf(os.Stderr, "growth: stream at 1000 events/s (after the first sweep: %v)\n", afterSweep)
	res, err := b.steady(ctx, 1000, r, r.pid())
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	return res, swept, err
}

// timeClaims writes growthClaims*growthClaimRows due PENDING rows (new
// events over 100 keys), times growthClaims claims of growthClaimRows
// through the store, as the poller claims, each followed by marking its rows
// SENT, and deletes those events again; it returns the median claim's
// milliseconds.
func (b *bench) timeClaims(ctx context.Context) (float64, error) {
	k := growthClaims * growthClaimRows
	if err := b.exec(ctx, `WITH ev AS (
		INSERT INTO outbox.events (topic, key, payload, event_type)
		SELECT $1, 'claim-' || (i % 100), '{"order_id": 1}', 'order.created' FROM generate_series(1, $2) i
		RETURNING id, topic, key, seq)
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, topic, key, seq, commit_lsn, tx_position)
		SELECT id, 'PENDING', 0, now() - interval '1 second', topic, key, seq, '0/0', 0 FROM ev`, b.o.topic, k); err != nil {
		return 0, fmt.Errorf("writing due rows: %w", err)
	}
	st, err := store.Open(b.o.dbURL, 30*time.Second)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var ms []float64
	for range growthClaims {
		start := time.Now()
		c, err := st.Claim(ctx, "bench-growth", growthClaimRows, false)
		if err != nil {
			return 0, err
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		if len(c.Rows) == 0 {
			return 0, fmt.Errorf("a claim found no due row")
		}
		// Sent, as the poller records them (untimed): a key's next rows
		// wait behind its PROCESSING ones.
		if err := b.exec(ctx, `UPDATE outbox.deliveries SET status = 'SENT', sent_at = now(), locked_by = NULL, locked_at = NULL
			WHERE status = 'PROCESSING' AND locked_by = 'bench-growth'`); err != nil {
			return 0, err
		}
	}
	slices.Sort(ms)
	fmt.Fprintf(os.Stderr, "growth: claims of %d rows: median %.1f ms, max %.1f ms\n", growthClaimRows, ms[len(ms)/2], ms[len(ms)-1])
	return ms[len(ms)/2], b.exec(ctx, `DELETE FROM outbox.events WHERE key LIKE 'claim-%'`)
}

// timeSweep times the gap sweep of the last --gap-lookback (24 h, up to
// --gap-grace ago) as the stream mode's first sweep after a start runs it,
// through the store: a window of growthSweepWindow events at a time, each
// swept in one statement. Every event there has its status row, so it walks
// them all and writes nothing. It returns the milliseconds in all and of the
// longest window, and the events in the range.
func (b *bench) timeSweep(ctx context.Context) (total, longest float64, walked int, err error) {
	st, err := store.Open(b.o.dbURL, 30*time.Second)
	if err != nil {
		return 0, 0, 0, err
	}
	defer st.Close()
	pol := retry.Policy{}.WithDefaults()
	upper := time.Now().Add(-5 * time.Minute) // --gap-grace
	from := upper.Add(-24 * time.Hour)
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.events WHERE created_at >= $1 AND created_at < $2`, from, upper).Scan(&walked); err != nil {
		return 0, 0, 0, err
	}
	start, windows := time.Now(), 0
	for cursor := from; cursor.Before(upper); windows++ {
		t0 := time.Now()
		end, windowed, err := st.SweepWindow(ctx, cursor, upper, growthSweepWindow)
		if err != nil {
			return 0, 0, 0, err
		}
		if _, _, _, err := st.Sweep(ctx, cursor, end, growthSweepBatch, pol.MaxAttempts, pol.JSON()); err != nil {
			return 0, 0, 0, err
		}
		longest = max(longest, float64(time.Since(t0).Microseconds())/1000)
		if cursor = end; !windowed {
			cursor = upper
		}
	}
	total = float64(time.Since(start).Microseconds()) / 1000
	fmt.Fprintf(os.Stderr, "growth: gap sweep of 24 h: %d events walked in %.0f ms, %d windows, the longest %.0f ms\n", walked, total, windows, longest)
	return total, longest, walked, nil
}

// timeGrowthConsole times the console's overview and FAILED pages, each
// --console-runs times, and returns their medians.
func (b *bench) timeGrowthConsole(ctx context.Context) (overview, failed float64, err error) {
	srv, stop, err := b.consoleServer()
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	var med [2]float64
	for i, path := range []string{"/", "/failed"} {
		ms, err := b.timePage(ctx, srv.URL+path, "")
		if err != nil {
			return 0, 0, fmt.Errorf("console %s: %w", path, err)
		}
		med[i] = ms[len(ms)/2]
	}
	return med[0], med[1], nil
}

// printGrowth prints the growth phase's rows as a table.
func (b *bench) printGrowth() {
	if len(b.growth) == 0 {
		return
	}
	fmt.Printf("\n%-11s %9s %9s %9s %8s %8s %9s %9s %8s %12s %8s %8s %9s %9s %9s %8s %8s\n", "rows", "del MiB", "ev MiB", "drain/s",
		"p50 ms", "p99 ms", "sweep s", "p99 in it", "claim ms", "sweep/max ms", "RSS MiB", "ret/s", "ret p99", "overview", "FAILED", "B/status", "B/event")
	for _, g := range b.growth {
		perRow := func(mib float64) string {
			if g.Rows == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", mib*1048576/float64(g.Rows))
		}
		retP99 := fmt.Sprintf("%.1f", g.RetentionP99ms)
		if g.RetentionLate > 0 {
			retP99 = fmt.Sprintf("%d late", g.RetentionLate)
		}
		fmt.Printf("%-11d %9.0f %9.0f %9.0f %8.1f %8.1f %9.1f %9.1f %8.1f %12s %8.0f %8.0f %9s %9.1f %9.1f %8s %8s\n", g.Rows,
			g.DeliveriesMiB, g.EventsMiB, g.DrainPerS, g.StreamP50ms, g.StreamP99ms, g.FirstSweepSeconds, g.StreamDuringSweepP99,
			g.ClaimMs, fmt.Sprintf("%.0f/%.0f", g.SweepMs, g.SweepLongestMs),
			max(g.DrainRSSMiB, g.StreamRSSMiB), g.RetentionPerS, retP99, g.OverviewMs, g.FailedMs,
			perRow(g.DeliveriesMiB), perRow(g.EventsMiB))
	}
	fmt.Println("del/ev MiB: outbox.deliveries/outbox.events with indexes and TOAST. drain/s: the relay's drain of --events new events (median of 3). " +
		"p50/p99: the stream at 1,000/s once the relay's first gap sweep has caught up (3 runs' events together). " +
		"sweep s: that first sweep, at the relay's pace, from its start. p99 in it: the stream's p99 in a run started with the relay. " +
		"claim: a poll-only claim of 200 due rows (median). sweep/max: the gap sweep of 24 h unpaced, in windows of 100,000 events, and its longest window. " +
		"RSS: the relay's peak (drain and stream). ret/s and ret p99: retention (--retention 6d, 5d, then 4d: a day each) deleting while the stream runs at 1,000/s, and the stream's p99 meanwhile (3 runs' events together). " +
		"(N late: N events had not reached the consumer a minute after the writer stopped.) overview, FAILED: the console's pages (median ms). B/status, B/event: bytes per row, indexes included.")
	b.printInterleaved()
}

// printInterleaved prints the interleaved runs' rows and those against an
// empty database, if any ran.
func (b *bench) printInterleaved() {
	if len(b.growth) == 0 {
		return
	}
	if b.growth[0].VersusEmpty != nil {
		fmt.Printf("\n%-11s %9s %11s %11s %11s %11s %8s %8s %14s %8s\n", "rows", "seconds", "p50 full ms", "p99 full ms", "p50 empty", "p99 empty", "p50 x", "p99 x",
			"median block", "its x")
		for _, g := range b.growth {
			if vs := g.VersusEmpty; vs != nil {
				p50x := 0.0
				if vs.OffP50ms > 0 {
					p50x = vs.OnP50ms / vs.OffP50ms
				}
				fmt.Printf("%-11d %9.0f %11.2f %11.1f %11.2f %11.1f %8.2f %8.2f %14s %8.2f\n", g.Rows, vs.Seconds, vs.OnP50ms, vs.OnP99ms, vs.OffP50ms, vs.OffP99ms, p50x, vs.Ratio(),
					fmt.Sprintf("%.1f/%.1f", vs.OnMedianBlockP99ms, vs.OffMedianBlockP99ms), vs.MedianRatio())
			}
		}
		fmt.Printf("Against an empty database: one stream run at 1,000/s a size with two relays, one on the bench's database (\"full\": the size's rows) and one on an empty database of the same server; "+
			"the writer writes blocks of %v to each in turn (full, empty, empty, full...). p50/p99: events written to each. x: full over empty. median block: the median of the blocks' p99s, full/empty (one stall makes one block's p99, and can make the pooled p99).\n", interleaveBlock)
	}
	if b.growth[0].Interleaved == nil {
		return
	}
	fmt.Printf("\n%-11s %9s %11s %11s %11s %11s %10s %10s %8s %14s %9s %9s %10s %12s\n", "rows", "seconds", "p50 del ms", "p99 del ms", "p50 not ms", "p99 not ms",
		"after del", "after not", "ratio", "median block", "its ratio", "deleted", "deleted/s", "slow steps")
	for _, g := range b.growth {
		il := g.Interleaved
		if il == nil {
			continue
		}
		fmt.Printf("%-11d %9.0f %11.2f %11.1f %11.2f %11.1f %10.1f %10.1f %8.2f %14s %9.2f %9d %10.0f %12s\n", g.Rows, il.Seconds, il.OnP50ms, il.OnP99ms,
			il.OffP50ms, il.OffP99ms, il.OffAfterOnP99ms, il.OffAfterOffP99ms, il.Ratio(), fmt.Sprintf("%.1f/%.1f", il.OnMedianBlockP99ms, il.OffMedianBlockP99ms),
			il.MedianRatio(), il.Deleted, il.DeletedPerS, fmt.Sprintf("%d/%d", il.SlowSteps, il.Steps))
	}
	fmt.Printf("Interleaved: one stream run at 1,000/s a size, in blocks of %v, on, off, off, on...; in the blocks \"del\" the bench deletes SENT events older than %v "+
		"with retention's own statement, %d every %v (1,250 a second, the relay's keep-up pace at 1,000/s; no backing off); \"not\": it does not. p50/p99: events due in those blocks. "+
		"after del, after not: the p99 of the blocks not deleting right after a block deleting, and after one not (what deletes leave behind lands in the first). ratio: p99 del over p99 not. median block: the median of the blocks' p99s, del/not (one stall makes one block's p99, and can make the pooled p99), and its ratio. slow steps: statements over %v (the pace then fell behind).\n",
		interleaveBlock, interleaveRetention, interleaveBatch, interleaveEvery, interleaveEvery)
}
