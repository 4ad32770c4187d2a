package relay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// A flush the database refuses keeps its counts for the next one (up to
// historyHoldBack: older minutes are dropped), and the next adds them to
// what was counted meanwhile; nothing is written twice.
func TestHistoryWriter_KeepsWhatTheDatabaseRefusedForTheNextFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	now := time.Date(2026, 11, 27, 10, 0, 30, 0, time.UTC)
	clock := func() time.Time { return now }
	h := &historyWriter{counts: newMinutes(clock), store: store.New(pool), retention: 48 * time.Hour, now: clock, log: zaptest.NewLogger(t)}
	minutes := func() string {
		rows, err := pool.Query(ctx, `SELECT to_char(minute AT TIME ZONE 'UTC', 'HH24:MI'), topic, delivered, failed
			FROM outbox.delivery_minutes WHERE topic <> '(all)' ORDER BY minute, topic`)
		if err != nil {
			t.Fatal(err)
		}
		var s string
		for rows.Next() {
			var m, topic string
			var d, f int64
			if err := rows.Scan(&m, &topic, &d, &f); err != nil {
				t.Fatal(err)
			}
			s += fmt.Sprintf("%s %s %d/%d; ", m, topic, d, f)
		}
		return s
	}
	exec := func(sql string) {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	h.counts.AddOutcomes("orders", 5, 0)
	exec(`ALTER TABLE outbox.delivery_minutes RENAME TO delivery_minutes_away`)
	h.flush(ctx) // refused: kept
	now = now.Add(time.Minute)
	h.counts.AddOutcomes("orders", 2, 1)
	exec(`ALTER TABLE outbox.delivery_minutes_away RENAME TO delivery_minutes`)
	h.flush(ctx)
	h.flush(ctx) // nothing left to add
	if got, want := minutes(), "10:00 orders 5/0; 10:01 orders 2/1; "; got != want {
		t.Fatalf("after a refused flush and a good one: %q, want %q", got, want)
	}

	h.counts.AddOutcomes("payments", 1, 0) // 10:01
	exec(`ALTER TABLE outbox.delivery_minutes RENAME TO delivery_minutes_away`)
	h.flush(ctx)
	now = now.Add(2 * time.Hour) // the database away for longer than historyHoldBack
	h.counts.AddOutcomes("payments", 3, 0)
	h.flush(ctx)
	exec(`ALTER TABLE outbox.delivery_minutes_away RENAME TO delivery_minutes`)
	h.flush(ctx)
	if got, want := minutes(), "10:00 orders 5/0; 10:01 orders 2/1; 12:01 payments 3/0; "; got != want {
		t.Fatalf("after two hours away: %q, want %q (the 10:01 count of payments dropped)", got, want)
	}
}

// A flush deletes the minutes past the retention, at most once every
// historyPruneEvery.
func TestHistoryWriter_DeletesMinutesPastTheRetentionOnceAMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	h := &historyWriter{counts: newMinutes(clock), store: store.New(pool), retention: time.Hour, now: clock, log: zaptest.NewLogger(t)}
	old := func() int {
		return pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE minute < $1`, now.Add(-time.Hour))
	}
	add := func(ago time.Duration) {
		if _, err := pool.Exec(ctx, `INSERT INTO outbox.delivery_minutes (minute, topic, delivered) VALUES ($1, 'orders', 1)`,
			now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	add(2 * time.Hour)
	add(30 * time.Minute)
	h.flush(ctx)
	if n := old(); n != 0 {
		t.Fatalf("%d rows older than the retention left after a flush", n)
	}
	now = now.Add(30 * time.Second)
	add(90 * time.Minute)
	h.flush(ctx) // within historyPruneEvery: not deleted yet
	if n := old(); n != 1 {
		t.Fatalf("%d old rows 30 s after deleting, want the one added since (deleted once a minute)", n)
	}
	now = now.Add(historyPruneEvery)
	h.flush(ctx)
	if n, all := old(), pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes`); n != 0 || all != 1 {
		t.Fatalf("a minute later: %d old rows of %d, want none of 1", n, all)
	}
}
