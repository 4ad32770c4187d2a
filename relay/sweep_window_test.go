package relay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/retry"
)

// withSentEvents returns a migrated database holding n SENT events, one a
// second from ago (an interval) on.
func withSentEvents(t *testing.T, n int, ago string) *pgxpool.Pool {
	t.Helper()
	return withSentEventsApart(t, n, ago, time.Second)
}

// withSentEventsApart is withSentEvents with the events created apart from
// one another.
func withSentEventsApart(t *testing.T, n int, ago string, apart time.Duration) *pgxpool.Pool {
	t.Helper()
	_, pool := pgtest.Migrated(t)
	if _, err := pool.Exec(context.Background(), `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - $2::interval + i * make_interval(secs => $3::float8) FROM generate_series(1, $1::int) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`, n, ago, apart.Seconds()); err != nil {
		t.Fatal(err)
	}
	return pool
}

// sweeper is the stream mode's poller over pool with batches of 10
// (windows of 500 events), reading the clock now.
func sweeper(t *testing.T, pool *pgxpool.Pool, m *metrics.Metrics, delay *streamDelay, now func() time.Time) (*poller, PollerConfig) {
	cfg := PollerConfig{BatchSize: 10, Interval: 200 * time.Millisecond}.withDefaults()
	return newPoller(cfg, "a_slot", pollerDeps{store: store.New(pool), metrics: m, delay: delay, now: now,
		settle: &settler{def: retry.Policy{}.WithDefaults(), log: zaptest.NewLogger(t)}, log: zaptest.NewLogger(t)}), cfg
}

// TestGapSweep_TheFirstSweepWalksTheLookbackInBoundedWindows runs the
// stream mode's gap sweep over 2,001 events of the last hour, every one
// with its status row but the newest, with batches of 10 (windows of 500
// events). Each statement walks at most one window, so the cursor moves a
// window at a time, each round says there is more to do, and the fifth
// round gives the one event without a row its PENDING row. A sweep that
// walked its whole range in one statement (86 million events for a day at
// 1,000/s) moved the cursor to the horizon in its first round.
func TestGapSweep_TheFirstSweepWalksTheLookbackInBoundedWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 2000, "1 hour")
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (id, topic, payload, created_at)
		VALUES ('00000000-0000-0000-0000-00000000aaaa', 'orders', '{}', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	p, cfg := sweeper(t, pool, metrics.New("test"), nil, nil)
	cursor := time.Now().Add(-2 * time.Hour)
	upper := time.Now()
	window := sweepWindowBatches * cfg.BatchSize

	for round := 1; ; round++ {
		from := cursor
		found, inserted, err := p.sweepRange(ctx, &cursor, upper)
		if err != nil {
			t.Fatal(err)
		}
		walked := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events WHERE created_at >= $1 AND created_at < $2`, from, cursor)
		if walked > window {
			t.Fatalf("round %d walked %d events (%s to %s), more than a window of %d", round, walked, from, cursor, window)
		}
		if round < 5 {
			if !cursor.Before(upper) || found != cfg.BatchSize || inserted != 0 {
				t.Fatalf("round %d: cursor %s (horizon %s), found %d, inserted %d: want the cursor a window on, short of the horizon, "+
					"a full batch reported (more to walk) and nothing inserted", round, cursor, upper, found, inserted)
			}
			continue
		}
		if !cursor.Equal(upper) || inserted != 1 {
			t.Fatalf("round %d: cursor %s (horizon %s), inserted %d: want the horizon reached and the event without a row given one",
				round, cursor, upper, inserted)
		}
		break
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE event_id = '00000000-0000-0000-0000-00000000aaaa' AND status = 'PENDING'`); n != 1 {
		t.Fatalf("the event without a status row has %d PENDING rows, want 1", n)
	}
}

// TestGapSweep_TheStreamsSweepWaitsBetweenWindows runs the stream mode's
// sweep, round by round as the poller does, over 2,000 events of the last
// hour that all have their status rows, with windows of 500 events and a
// clock the test moves. After a full window the sweep does not come back at
// once (it reports nothing found, so the poller pauses), and a round before
// its pace allows walks nothing; once the clock reaches it, the next window.
// outbox_relay_gap_sweep_behind_seconds says how far behind its horizon
// the cursor is: over half an hour after the first window, under a minute
// once it has caught up.
func TestGapSweep_TheStreamsSweepWaitsBetweenWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 2000, "1 hour")
	clock := time.Now()
	m := metrics.New("test")
	p, _ := sweeper(t, pool, m, nil, func() time.Time { return clock })
	round := func() (found int) {
		t.Helper()
		found, err := p.sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}

	before := p.cursor
	if found := round(); found != 0 || !p.cursor.After(before) {
		t.Fatalf("first round: found %d, cursor moved from %s to %s: want a window walked and 0 reported (no round at once)", found, before, p.cursor)
	}
	if behind := testutil.ToFloat64(m.GapSweepBehind); behind < 1800 {
		t.Fatalf("gap_sweep_behind_seconds after the first window: %.0f, want over half an hour (the window ends at the 500th event of the hour)", behind)
	}
	if !p.sweepNext.After(clock) {
		t.Fatalf("next window at %s, not after now (%s): the sweep would walk on at once", p.sweepNext, clock)
	}
	at := p.cursor
	if round(); !p.cursor.Equal(at) {
		t.Fatalf("a round before the pace allows moved the cursor from %s to %s", at, p.cursor)
	}
	windows := 1
	for p.cursor.Before(clock.Add(-10 * time.Minute)) { // the horizon is about --gap-grace (5 min) ago
		if windows++; windows > 10 {
			t.Fatalf("%d windows and the cursor is at %s: it never caught up", windows, p.cursor)
		}
		clock = p.sweepNext
		at := p.cursor
		if round(); !p.cursor.After(at) {
			t.Fatalf("window %d at its time did not move the cursor from %s", windows, at)
		}
	}
	if windows < 4 {
		t.Errorf("caught up in %d windows, want at least 4 (2,000 events, 500 a window)", windows)
	}
	if behind := testutil.ToFloat64(m.GapSweepBehind); behind > 60 {
		t.Errorf("gap_sweep_behind_seconds once caught up: %.0f, want under a minute", behind)
	}
}

// TestGapSweep_TheStreamsSweepWaitsWhileStreamedEventsAreLate: while the
// stream's slowest events of the last second reach Kafka 80 ms after their
// commit against a floor of 2 ms, the sweep walks nothing (the stream
// first); once they are back at 2 ms, it walks its window.
func TestGapSweep_TheStreamsSweepWaitsWhileStreamedEventsAreLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 1000, "1 hour")
	clock := time.Now()
	delay := &streamDelay{}
	feed(delay, clock.Add(-4*time.Minute), clock.Add(-3*time.Second), 2*time.Millisecond)
	feed(delay, clock.Add(-2900*time.Millisecond), clock, 80*time.Millisecond)
	p, _ := sweeper(t, pool, metrics.New("test"), delay, func() time.Time { return clock })

	before := p.cursor
	if _, err := p.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.cursor.Equal(before) {
		t.Fatalf("while streamed events were 78 ms later than their floor the sweep moved its cursor from %s to %s", before, p.cursor)
	}
	feed(delay, clock.Add(100*time.Millisecond), clock.Add(3*time.Second), 2*time.Millisecond)
	clock = clock.Add(3 * time.Second)
	if _, err := p.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.cursor.After(before) {
		t.Fatalf("with the stream at ease again the sweep did not walk (cursor %s)", p.cursor)
	}
}
