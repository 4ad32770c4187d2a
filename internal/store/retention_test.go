package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	before := settled(t, pool, flushes) // the set-up's flushes
	s := store.New(conn)
	var from store.RetentionCursor
	const steps = 50
	for i := range steps {
		walked, deleted, to, err := s.RetentionStep(ctx, false, from, time.Now().Add(-7*24*time.Hour), 10, "")
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

// settled reads a count of the server's statistics once it holds still: a
// session's counts reach them late (on PostgreSQL 14 through its statistics
// collector, which sends them every half second).
func settled(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	n := pgtest.Count(t, pool, sql)
	for range 10 {
		time.Sleep(700 * time.Millisecond)
		m := pgtest.Count(t, pool, sql)
		if m == n {
			break
		}
		n = m
	}
	return n
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

// TestRetentionStep_CompressesItsWALWhenAskedWhateverTheServersSetting
// deletes 1,000 events after a checkpoint without compress and 1,000 more
// after another with the value RetentionWALCompression finds, on a server
// of its own with wal_compression off: most of a delete's WAL is the page
// images the checkpoint forces, and with compress they shrink.
func TestRetentionStep_CompressesItsWALWhenAskedWhateverTheServersSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.Cluster(t, nil, "wal_compression=off", "full_page_writes=on", "autovacuum=off")
	pgtest.Migrate(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	pgtest.Exec(t, pool, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', jsonb_build_object('note', repeat('x', 500)), now() - interval '10 days' + i * interval '1 second'
		FROM generate_series(1, 2000) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	compress, err := store.RetentionWALCompression(ctx, conn)
	if err != nil || compress == "" {
		t.Fatalf("a superuser may set wal_compression: got %q, %v", compress, err)
	}
	s := store.New(conn)
	var from store.RetentionCursor
	wal := func(c string) int {
		pgtest.Exec(t, pool, `CHECKPOINT`)
		var before, after string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&before); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			walked, deleted, to, err := s.RetentionStep(ctx, false, from, time.Now().Add(-7*24*time.Hour), 100, c)
			if err != nil || walked != 100 || deleted != 100 {
				t.Fatalf("compress %q: walked %d, deleted %d, %v; want 100 and 100", c, walked, deleted, err)
			}
			from = to
		}
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		return pgtest.Count(t, pool, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::int`, after, before)
	}
	plain, compressed := wal(""), wal(compress)
	t.Logf("1,000 deletes: %d bytes of WAL without, %d with wal_compression %s", plain, compressed, compress)
	if compressed*2 > plain {
		t.Errorf("1,000 deletes wrote %d bytes of WAL with wal_compression %s for their transactions, %d without; want under half",
			compressed, compress, plain)
	}
	if got := pgtest.Count(t, pool, `SELECT count(*) FROM pg_settings WHERE name = 'wal_compression' AND setting = 'off'`); got != 1 {
		t.Errorf("the server's wal_compression changed")
	}
}

// TestRetentionWALCompression_OnlyForARoleThatMaySetIt: wal_compression is
// a superuser's setting; migrate grants SET on it to outbox_relay on
// PostgreSQL 15 and newer (roles.sql), so a relay's role may compress
// retention's WAL there, and a writer's never.
func TestRetentionWALCompression_OnlyForARoleThatMaySetIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, _ := pgtest.Migrated(t)
	pgtest.LoginRoles(t, dbURL)
	try := func(url string) string {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		v, err := store.RetentionWALCompression(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if c.PgConn().TxStatus() != 'I' {
			t.Errorf("%s: left a transaction open", url)
		}
		return v
	}
	if v := try(pgtest.WriterURL(dbURL)); v != "" {
		t.Errorf("a writer's role may set wal_compression: %q", v)
	}
	v := try(pgtest.RelayURL(dbURL))
	if major := pgtest.Major(t); (major >= 15) != (v == "lz4" || v == "on") {
		t.Errorf("PostgreSQL %d: a relay's role gets %q", major, v)
	}
}

// TestRetentionStep_WritesTwoWALRecordsAnEvent deletes 1,000 SENT events on
// a server of its own and counts the WAL records (pg_stat_wal): an event's
// delete and its status row's, about two an event. A step locked each
// status row first (FOR UPDATE) and let the events' trigger delete it after:
// a record more an event (3.1), and a step about a third slower.
func TestRetentionStep_WritesTwoWALRecordsAnEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.Cluster(t, nil, "autovacuum=off")
	pgtest.Migrate(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	pgtest.Exec(t, pool, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '10 days' + i * interval '1 second' FROM generate_series(1, 1000) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	const records = `SELECT wal_records::int FROM pg_stat_wal`
	pool.Reset() // the set-up's session ends, and its counts are sent
	before := settled(t, pool, records)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(conn)
	var from store.RetentionCursor
	for i := range 10 {
		walked, deleted, to, err := s.RetentionStep(ctx, false, from, time.Now().Add(-7*24*time.Hour), 100, "")
		if err != nil || walked != 100 || deleted != 100 {
			t.Fatalf("step %d: walked %d, deleted %d, %v; want 100 and 100", i+1, walked, deleted, err)
		}
		from = to
	}
	conn.Close(ctx) // its counts are sent as its session ends
	n := settled(t, pool, records) - before
	t.Logf("1,000 events deleted with their status rows: %d WAL records", n)
	if n > 2500 {
		t.Errorf("1,000 events deleted with their status rows in %d WAL records, want about 2,000 (an event's delete and its status row's)", n)
	}
	if left := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries`); left != 0 {
		t.Errorf("%d status rows left, want all 1,000 deleted", left)
	}
}

// TestRetentionStep_SkipsAStatusRowAnotherSessionHolds: a step takes each
// status row as it deletes it, so it waits on a row another session holds
// (a resend, a person's open transaction). Up to its lock timeout only:
// then it takes the step again skipping the held row, deletes the rest and
// keeps that one, and a later step deletes it once it is let go. Both
// walks: over events, and over mapped events' status rows; each step as
// the relay's role (a lock in its statement that the role may not take
// fails every step, taken or not).
func TestRetentionStep_SkipsAStatusRowAnotherSessionHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, pool := pgtest.Migrated(t)
	events := struct{ insert, left, oldest string }{
		`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
			SELECT 'orders', '{}', now() - interval '9 days' + ($1 + i) * interval '1 second' FROM generate_series(1, 10) i RETURNING id)
			INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`,
		`SELECT count(*) FROM outbox.events`,
		`SELECT d.event_id::text FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id ORDER BY e.created_at LIMIT 1`,
	}
	kinds := []struct {
		name   string
		mapped bool
		insert string // 10 old SENT events, 9 days old and a second apart from $1
		left   string // the events or mapped status rows left
		oldest string // the oldest status row, whose event_id the holder locks
		of     string // what the holder locks: d, the status row, or e, the event
	}{
		{"events", false, events.insert, events.left, events.oldest, "d"},
		{"mapped", true,
			`INSERT INTO outbox.deliveries (event_id, status, attempts, source, topic, created_at)
				SELECT outbox.event_id('public.t', ($1 + i)::text), 'SENT', 1, 'public.t', 'orders', now() - interval '9 days' + ($1 + i) * interval '1 second'
				FROM generate_series(1, 10) i`,
			`SELECT count(*) FROM outbox.deliveries WHERE source IS NOT NULL`,
			`SELECT d.event_id::text FROM outbox.deliveries d WHERE d.source IS NOT NULL ORDER BY d.created_at LIMIT 1`, "d"},
	}
	cutoff := time.Now().Add(-7 * 24 * time.Hour)
	pgtest.LoginRoles(t, dbURL)
	s := store.New(pgtest.Pool(t, pgtest.RelayURL(dbURL)))
	round := 0
	for _, k := range kinds {
		for _, mode := range []string{"FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) {
				round++
				pgtest.Exec(t, pool, k.insert, round*10)
				holder, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Rollback(ctx) //nolint:errcheck // let go below
				var held string
				if err := holder.QueryRow(ctx, k.oldest+` `+mode+` OF `+k.of).Scan(&held); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				var walked int
				var deleted int64
				go func() {
					var err error
					walked, deleted, _, err = s.RetentionStep(ctx, k.mapped, store.RetentionCursor{}, cutoff, 1000, "")
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a retention step waited 10 s on a status row another session holds")
				}
				if left := pgtest.Count(t, pool, k.left); walked != 10 || deleted != 9 || left != 1 {
					t.Fatalf("walked %d, deleted %d, %d left; want 10 walked, all but the held one deleted", walked, deleted, left)
				}
				if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE event_id = $1 AND status = 'SENT'`, held); n != 1 {
					t.Fatalf("the held status row is gone")
				}
				if err := holder.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				if _, deleted, _, err := s.RetentionStep(ctx, k.mapped, store.RetentionCursor{}, cutoff, 1000, ""); err != nil || deleted != 1 {
					t.Fatalf("once let go: deleted %d, %v; want the held one", deleted, err)
				}
			})
		}
	}
}

// TestRetentionStep_KeepsAnEventResentWhileItWaitsOnItsStatusRow: an
// operator resends an old SENT event (its status row PENDING) in a
// transaction that commits while a retention step waits on that row. The
// step re-checks the row as its DELETE takes it, and keeps the event: a
// resend that retention deleted would be an event lost.
func TestRetentionStep_KeepsAnEventResentWhileItWaitsOnItsStatusRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	var resent string
	if err := pool.QueryRow(ctx, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '9 days' + i * interval '1 second' FROM generate_series(1, 10) i RETURNING id, created_at)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev ORDER BY created_at
		RETURNING event_id::text`).Scan(&resent); err != nil {
		t.Fatal(err)
	}
	operator, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := operator.Exec(ctx, `SELECT outbox.resend($1)`, resent); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var deleted int64
	go func() {
		var err error
		_, deleted, _, err = store.New(pool).RetentionStep(ctx, false, store.RetentionCursor{}, time.Now().Add(-7*24*time.Hour), 100, "")
		done <- err
	}()
	pgtest.Eventually(t, 5*time.Second, "the step waiting on the resent event's status row", func() (bool, string) {
		n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		return n == 1, fmt.Sprintf("%d sessions waiting on a lock", n)
	})
	if err := operator.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if deleted != 9 {
		t.Errorf("deleted %d, want the 9 events not resent", deleted)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events e JOIN outbox.deliveries d ON d.event_id = e.id
		WHERE e.id = $1 AND d.status = 'PENDING'`, resent); n != 1 {
		t.Errorf("the resent event, or its PENDING status row, is gone")
	}
}
