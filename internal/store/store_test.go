package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// dbNow is the database's clock.
func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestStore_StuckRowsAreTakenBackOnlyPastTheThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 2)
	// Two rows claimed now by an instance that will die; one has used 2 of
	// its 3 attempts, the other has no limit of its own.
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, attempts, max_attempts, locked_by, locked_at)
		VALUES ($1, 'PROCESSING', 2, 3, 'dead', now()), ($2, 'PROCESSING', 0, NULL, 'dead', now())`, ids[0], ids[1]); err != nil {
		t.Fatal(err)
	}
	now := dbNow(t, pool)
	st := store.New(pool)

	early, err := st.WithClock(at(now.Add(4*time.Minute))).RescueStuck(ctx, 5*time.Minute, 10, 5)
	if err != nil || len(early) != 0 {
		t.Fatalf("4 minutes in, with a 5 minute threshold: took back %d rows (%v), want none", len(early), err)
	}
	late, err := st.WithClock(at(now.Add(6*time.Minute))).RescueStuck(ctx, 5*time.Minute, 10, 5)
	if err != nil || len(late) != 2 {
		t.Fatalf("6 minutes in: took back %d rows (%v), want 2", len(late), err)
	}
	status := map[string]string{}
	for _, r := range late {
		status[r.EventID] = r.Status
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'
		AND failure_reason = 'RETRIES_EXHAUSTED' AND attempts = 3 AND event_id = $1`, ids[0]); got != 1 {
		t.Errorf("the row on its last attempt is not FAILED RETRIES_EXHAUSTED with 3 attempts: %v", status)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'
		AND attempts = 1 AND locked_by IS NULL AND event_id = $1`, ids[1]); got != 1 {
		t.Errorf("the row without a limit of its own (the relay's is 5) is not PENDING after 1 attempt: %v", status)
	}
}

func TestStore_AFailedAttemptIsClaimedAgainOnlyAfterItsBackoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 1)
	now := dbNow(t, pool)
	st := store.New(pool).WithClock(at(now))
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, locked_by, locked_at)
		VALUES ($1, 'PROCESSING', 'me', now())`, ids[0]); err != nil {
		t.Fatal(err)
	}
	var o store.Outcomes
	o.Add(store.Outcome{EventID: ids[0], Status: store.StatusPending, Attempts: 1, LastError: "broker said no",
		Delay: 30 * time.Second, MaxAttempts: 5})
	if err := st.RecordOutcomes(ctx, "someone-else", &o); err != nil {
		t.Fatal(err)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PROCESSING'`); got != 1 {
		t.Fatal("an instance that does not hold the row recorded an outcome on it")
	}
	if err := st.RecordOutcomes(ctx, "me", &o); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after time.Duration
		want  int
	}{{29 * time.Second, 0}, {31 * time.Second, 1}} {
		c, err := st.WithClock(at(now.Add(tc.after))).Claim(ctx, "me", 10, false)
		if err != nil || len(c.Rows) != tc.want {
			t.Fatalf("%s after the failure: claimed %d rows (%v), want %d", tc.after, len(c.Rows), err, tc.want)
		}
	}
}

func TestStore_GapSweepTakesOnlyEventsOlderThanTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	pgtest.InsertEvents(t, pool, 3)
	now := dbNow(t, pool)
	st := store.New(pool)
	from := now.Add(-time.Hour)
	for _, tc := range []struct {
		clock time.Time
		want  int
	}{{now.Add(4 * time.Minute), 0}, {now.Add(6 * time.Minute), 3}} {
		var h store.Horizon
		upper, _, err := h.Look(ctx, st.WithClock(at(tc.clock)), 5*time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		found, _, inserted, err := st.Sweep(ctx, from, upper, 100, 5, []byte(`{}`))
		if err != nil || found != tc.want || inserted != tc.want {
			t.Fatalf("clock %s after the inserts: swept %d, inserted %d (%v); want %d", tc.clock.Sub(now), found, inserted, err, tc.want)
		}
	}
}

func TestStore_StreamAndPollerOutcomesLeaveTheSameRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 2)
	st := store.New(pool)
	sent := func(id [16]byte) *store.Outcomes {
		var o store.Outcomes
		o.Add(store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, Partition: 2, Offset: 41, MaxAttempts: 5})
		return &o
	}
	if visible, err := st.InsertOutcomes(ctx, sent(ids[0]), []byte(`{}`)); err != nil || visible != 1 {
		t.Fatalf("stream outcome: %d visible, %v", visible, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, locked_by, locked_at)
		VALUES ($1, 'PROCESSING', 'me', now())`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordOutcomes(ctx, "me", sent(ids[1])); err != nil {
		t.Fatal(err)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT' AND attempts = 1
		AND kafka_partition = 2 AND kafka_offset = 41 AND sent_at IS NOT NULL AND max_attempts = 5
		AND last_error IS NULL AND failure_reason IS NULL`); got != 2 {
		t.Fatalf("%d of 2 rows say SENT at partition 2, offset 41", got)
	}
}

func TestStore_ASentOutcomeLeavesTheSameRowInABatchOfSentOnlyAsInAMixedOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 3)
	st := store.New(pool).WithClock(at(dbNow(t, pool)))
	sent := func(id [16]byte) store.Outcome {
		return store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, Partition: 2, Offset: 41, MaxAttempts: 5,
			CommitLSN: 77, TxPosition: 3}
	}
	var only, mixed store.Outcomes
	only.Add(sent(ids[0]))
	mixed.Add(sent(ids[1]))
	mixed.Add(store.Outcome{EventID: ids[2], Status: store.StatusPending, LastError: "broker said no", Delay: time.Second,
		MaxAttempts: 5, CommitLSN: 77, TxPosition: 4})
	for _, o := range []*store.Outcomes{&only, &mixed} {
		if _, err := st.InsertOutcomes(ctx, o, []byte(`{"max_attempts": 5}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Every column but the event's id, its insertion order and the
	// statement's own time (the columns' default, now()).
	row := `SELECT to_jsonb(d) - 'event_id' - 'seq' - 'created_at' - 'updated_at' FROM outbox.deliveries d WHERE event_id = $1`
	var a, b string
	if err := pool.QueryRow(ctx, row, ids[0]).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, row, ids[1]).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("a SENT row alone:\n%s\nin a mixed batch:\n%s", a, b)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
		WHERE d.seq = e.seq AND d.seq > 0`); got != 3 {
		t.Fatalf("%d of 3 rows took their event's insertion order", got)
	}
}

func TestStore_ABatchOfSentOutcomesLeavesARowThatAppearedMeanwhileAloneAndWritesTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 3)
	st := store.New(pool)
	// The gap sweep got to the second event first.
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, next_attempt_at) VALUES ($1, 'PENDING', now())`, ids[1]); err != nil {
		t.Fatal(err)
	}
	var o store.Outcomes
	for i, id := range ids {
		o.Add(store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, Offset: int64(i), MaxAttempts: 5})
	}
	if visible, err := st.InsertOutcomes(ctx, &o, []byte(`{}`)); err != nil || visible != 3 {
		t.Fatalf("%d of 3 visible: %v", visible, err)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); got != 2 {
		t.Fatalf("%d SENT rows, want 2", got)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING' AND event_id = $1`, ids[1]); got != 1 {
		t.Fatal("the row that was there first was overwritten")
	}

	// The next batches still get their rows.
	more := pgtest.InsertEvents(t, pool, 2)
	o.Reset()
	for _, id := range more {
		o.Add(store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, MaxAttempts: 5})
	}
	if visible, err := st.InsertOutcomes(ctx, &o, []byte(`{}`)); err != nil || visible != 2 {
		t.Fatalf("next batch: %d of 2 visible: %v", visible, err)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); got != 4 {
		t.Fatalf("%d SENT rows, want 4", got)
	}
}
