package relay

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/retry"
)

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
	_, pool := pgtest.Migrated(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '1 hour' + i * interval '1 second' FROM generate_series(1, 2000) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	exec(`INSERT INTO outbox.events (id, topic, payload, created_at)
		VALUES ('00000000-0000-0000-0000-00000000aaaa', 'orders', '{}', now() - interval '1 minute')`)

	cfg := PollerConfig{BatchSize: 10}.withDefaults()
	p := newPoller(cfg, "a_slot", pollerDeps{store: store.New(pool), metrics: metrics.New("test"),
		settle: &settler{def: retry.Policy{}.WithDefaults(), log: zaptest.NewLogger(t)}, log: zaptest.NewLogger(t)})
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
