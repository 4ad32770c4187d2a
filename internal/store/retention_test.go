package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// TestRetentionStep_ItsCommitsDoNotWaitForTheWALFlush runs 50 retention
// steps of 10 deletes each on a server of its own with fsync on, and counts
// the server's WAL flushes (pg_stat_wal.wal_sync): the steps' commits do not
// wait for their WAL to reach the disk (the stream's commits waited behind
// retention's flushes at 20,000,000 rows), so the flushes are the WAL
// writer's, a few, not one a step.
func TestRetentionStep_ItsCommitsDoNotWaitForTheWALFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.Cluster(t, nil, "fsync=on", "synchronous_commit=on")
	pgtest.Migrate(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	pgtest.Exec(t, pool, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '10 days' + i * interval '1 second' FROM generate_series(1, 500) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	flushes := `SELECT wal_sync FROM pg_stat_wal`
	if pgtest.Major(t) >= 18 { // the count moved to pg_stat_io
		flushes = `SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal'`
	}
	syncs := func() int { return pgtest.Count(t, pool, flushes) }

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// The flushes of the set-up reach the count late on PostgreSQL 14 (its
	// statistics collector): wait until it holds still.
	before := syncs()
	for range 10 {
		time.Sleep(700 * time.Millisecond)
		if n := syncs(); n != before {
			before = n
			continue
		}
		break
	}
	s := store.New(conn)
	var from store.RetentionCursor
	const steps = 50
	for i := range steps {
		walked, deleted, to, err := s.RetentionStep(ctx, false, from, time.Now().Add(-7*24*time.Hour), 10)
		if err != nil || walked != 10 || deleted != 10 {
			t.Fatalf("step %d: walked %d, deleted %d, %v; want 10 and 10", i+1, walked, deleted, err)
		}
		from = to
	}
	conn.Close(ctx) // its statistics reach pg_stat_wal as its session ends
	// Poll: a step that flushed shows as 50 flushes within a second or two.
	deadline := time.Now().Add(3 * time.Second)
	n := syncs() - before
	for ; n < steps && time.Now().Before(deadline); n = syncs() - before {
		time.Sleep(100 * time.Millisecond)
	}
	if n >= steps/2 {
		t.Errorf("%d WAL flushes during %d retention steps, want a few (the WAL writer's): each step's commit waited for its own", n, steps)
	}
	if left := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events`); left != 0 {
		t.Errorf("%d events left, want all 500 deleted", left)
	}
}

// TestRetentionProgress_ACountOfKeptEventsHoldsOnlyForItsInstant records a
// walk at an instant past 20 kept events of it, then moves walked_to as a
// relay of the release before migration 22 does (its statement sets
// walked_to and full_walk_at alone): the 20 were of another instant, and
// the walk reads none, where it would have walked past 20 events of the new
// instant unread.
func TestRetentionProgress_ACountOfKeptEventsHoldsOnlyForItsInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	s := store.New(pool)
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	if err := s.SaveRetentionProgress(ctx, false, store.RetentionProgress{Walked: store.RetentionCursor{At: at, Past: 20}, FullWalkAt: at}); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := s.RetentionProgress(ctx, false); err != nil || !ok || p.Walked.Past != 20 || !p.Walked.At.Equal(at) {
		t.Fatalf("read back %+v, %v, %v; want past 20 at %s", p, ok, err, at)
	}
	pgtest.Exec(t, pool, `INSERT INTO outbox.retention_progress (walk, walked_to, full_walk_at) VALUES ('events', '2026-11-20 13:00Z', '2026-11-20 12:00Z')
		ON CONFLICT (walk) DO UPDATE SET walked_to = EXCLUDED.walked_to, full_walk_at = EXCLUDED.full_walk_at`)
	if p, _, err := s.RetentionProgress(ctx, false); err != nil || p.Walked.Past != 0 {
		t.Fatalf("after an earlier release's relay moved walked_to: %+v, %v; want past 0", p, err)
	}
}

// RetentionLockHolder names the session that holds the retention lock and
// tells a relay's (its role a member of outbox_relay) from any other: an
// advisory lock takes no privilege, so a writer of outbox.events can hold it.
func TestRetentionLockHolder_TellsARelaysSessionFromAWritersOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, _ := pgtest.Migrated(t)
	pgtest.LoginRoles(t, dbURL)
	connect := func(url string) *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	relay, other := connect(pgtest.RelayURL(dbURL)), connect(pgtest.RelayURL(dbURL))
	if _, found, err := store.RetentionLockHolder(ctx, other); err != nil || found {
		t.Fatalf("nobody holds it: found %v, err %v", found, err)
	}
	if ok, err := store.TryRetentionLock(ctx, relay); err != nil || !ok {
		t.Fatalf("taking it: %v %v", ok, err)
	}
	h, found, err := store.RetentionLockHolder(ctx, other)
	if err != nil || !found || !h.Relay || h.PID != int32(relay.PgConn().PID()) || h.User != pgtest.RelayRole {
		t.Fatalf("held by a relay: %+v found %v err %v", h, found, err)
	}
	relay.Close(ctx)

	intruder := connect(pgtest.WriterURL(dbURL))
	if _, err := intruder.Exec(ctx, `SET application_name = 'not a relay'`); err != nil {
		t.Fatal(err)
	}
	if _, err := intruder.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('outbox-relay/retention', 0))`); err != nil {
		t.Fatal(err)
	}
	if ok, err := store.TryRetentionLock(ctx, other); err != nil || ok {
		t.Fatalf("taken from the writer: %v %v", ok, err)
	}
	h, found, err = store.RetentionLockHolder(ctx, other)
	if err != nil || !found || h.Relay || h.PID != int32(intruder.PgConn().PID()) || h.User != "outbox_test_intruder" || h.App != "not a relay" {
		t.Fatalf("held by a writer: %+v found %v err %v", h, found, err)
	}
}

// A prepared transaction can hold the retention lock with no session
// behind it (pid NULL in pg_locks): RetentionLockHolder names it by its
// gid and owner, not a relay's, where it found no holder at all.
func TestRetentionLockHolder_NamesAPreparedTransactionThatHoldsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.Cluster(t, nil, "max_prepared_transactions=2")
	pgtest.Migrate(t, dbURL)
	pgtest.LoginRoles(t, dbURL)
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('outbox-relay/retention', 0)); PREPARE TRANSACTION 'held'`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = holder.Exec(ctx, `ROLLBACK PREPARED 'held'`) }()
	relay, err := pgx.Connect(ctx, pgtest.RelayURL(dbURL))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close(ctx)
	if ok, err := store.TryRetentionLock(ctx, relay); err != nil || ok {
		t.Fatalf("took the lock the prepared transaction holds: %v %v", ok, err)
	}
	h, found, err := store.RetentionLockHolder(ctx, relay)
	if err != nil || !found || h.Relay || h.PID != 0 || h.App != "prepared transaction held" || h.User != "postgres" {
		t.Fatalf("held by a prepared transaction: %+v found %v err %v", h, found, err)
	}
}
