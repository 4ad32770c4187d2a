package migrations_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func TestMigrations_UpDownUpLeavesTheSameSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != migrations.Latest() {
		t.Fatalf("first Up: applied %v, err %v", applied, err)
	}
	if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != 0 {
		t.Fatalf("second Up applied %v (err %v), want nothing", applied, err)
	}
	if _, err := migrations.Down(ctx, pool, 0); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'outbox' AND tablename <> 'schema_migrations'`); n != 0 {
		t.Fatalf("%d outbox tables left after Down to 0", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_publication`); n != 0 {
		t.Fatalf("%d publications left after Down to 0", n)
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
	if v, err := migrations.Current(ctx, pool); err != nil || v != migrations.Latest() {
		t.Fatalf("Current = %d (err %v), want %d", v, err, migrations.Latest())
	}
}

func TestMigrations_TwoProcessesMigratingAtOnceBothSucceed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDB(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			_, errs[i] = migrations.Up(ctx, conn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	pool := pgtest.Pool(t, dbURL)
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.schema_migrations`); n != migrations.Latest() {
		t.Fatalf("%d versions recorded, want %d", n, migrations.Latest())
	}
}

func TestMigrations_PrintedSQLBuildsTheSchemaAndRecordsItsVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var buf bytes.Buffer
	if err := migrations.Print(&buf); err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if _, err := pool.Exec(ctx, buf.String()); err != nil {
		t.Fatalf("applying printed SQL: %v", err)
	}
	if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != 0 {
		t.Fatalf("Up after the printed SQL applied %v (err %v), want nothing", applied, err)
	}
	if !strings.Contains(buf.String(), "CREATE TABLE outbox.deliveries") {
		t.Fatal("printed SQL lacks outbox.deliveries")
	}
}

func TestMigrations_DeletingOrTruncatingEventsRemovesTheirStatusRows(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	exec := func(sql string) { t.Helper(); pgtest.Exec(t, pool, sql) }
	exec(`WITH ev AS (INSERT INTO outbox.events (topic, payload) SELECT 't', jsonb_build_object('n', s)
	                  FROM generate_series(1, 10) AS s RETURNING id, payload)
	      INSERT INTO outbox.deliveries (event_id, status) SELECT id, 'SENT' FROM ev`)
	exec(`INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, error)
	      SELECT event_id, a, now(), 'refused' FROM outbox.deliveries, generate_series(1, 2) a`)
	exec(`DELETE FROM outbox.events WHERE (payload->>'n')::int <= 3`)
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries`); n != 7 {
		t.Fatalf("%d status rows after deleting 3 of 10 events, want 7", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_attempts a
		WHERE NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = a.event_id)`); n != 0 {
		t.Fatalf("%d failed attempts outlived their status rows", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_attempts`); n != 14 {
		t.Fatalf("%d failed attempts after deleting 3 of 10 events, want the other 7's 14", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries d
		WHERE NOT EXISTS (SELECT 1 FROM outbox.events e WHERE e.id = d.event_id)`); n != 0 {
		t.Fatalf("%d status rows outlived their events", n)
	}
	exec(`TRUNCATE outbox.events`)
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries`); n != 0 {
		t.Fatalf("%d status rows after TRUNCATE outbox.events, want 0", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_attempts`); n != 0 {
		t.Fatalf("%d failed attempts after TRUNCATE outbox.events, want 0", n)
	}
}

func TestMigrations_NewEventIdsAreVersion7AndFollowTheirCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	// One transaction per event, a few milliseconds apart, so the time
	// prefixes differ.
	for i := range 5 {
		if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (topic, payload) SELECT 't', jsonb_build_object('n', $1::int) FROM pg_sleep(0.002)`, i); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT id::text, (payload->>'n')::int,
		       abs(extract(epoch FROM created_at) * 1000 - ('x' || translate(left(id::text, 13), '-', ''))::bit(48)::bigint)
		FROM outbox.events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := 0
	for rows.Next() {
		var id string
		var n int
		var skewMS float64
		if err := rows.Scan(&id, &n, &skewMS); err != nil {
			t.Fatal(err)
		}
		if id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Errorf("id %s: version %c, variant %c; want version 7, variant 10xx", id, id[14], id[19])
		}
		if n != want {
			t.Errorf("ordered by id, event %d comes at position %d", n, want)
		}
		if skewMS > 1000 {
			t.Errorf("id %s: its time prefix is %.0f ms away from created_at", id, skewMS)
		}
		want++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want != 5 {
		t.Fatalf("read %d events, want 5", want)
	}
}

func TestMigrations_DownRestoresRandomIds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	if _, err := migrations.Down(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, payload) VALUES ('t', '{}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if id[14] != '4' {
		t.Fatalf("after Down to 3, new id %s has version %c, want 4", id, id[14])
	}
}

func TestMigrations_ResendLeavesTheAttemptLimitToTheRelayUnlessTheEventSetsOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (id, topic, payload, max_attempts) VALUES
		('00000000-0000-0000-0000-000000000001', 't', '{}', NULL),
		('00000000-0000-0000-0000-000000000002', 't', '{}', 9)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT outbox.resend(id) FROM outbox.events`); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING' AND
		((event_id::text LIKE '%1' AND max_attempts IS NULL) OR (event_id::text LIKE '%2' AND max_attempts = 9))`); n != 2 {
		t.Fatalf("%d of 2 resent rows have the right max_attempts (NULL: the relay's; 9: the event's own)", n)
	}
	if _, err := migrations.Down(ctx, pool, 4); err != nil {
		t.Fatalf("Down to 4: %v", err)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE max_attempts IS NULL`); n != 0 {
		t.Fatalf("%d rows without max_attempts after Down to 4, which requires one", n)
	}
}

func TestMigrations_IndexesAreBuiltOnlineAndAnInvalidOneIsBuiltAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Indexes(ctx, pool); err != nil {
		t.Fatal(err)
	}
	want := len(migrations.OnlineIndexes())
	valid := `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname IN ('events_key_idx', 'mapped_events_key_idx', 'deliveries_status_idx', 'deliveries_reason_idx',
		                    'deliveries_pending_created_idx', 'deliveries_dead_letter_due_idx', 'deliveries_status_topic_idx',
		                    'deliveries_no_topic_idx', 'deliveries_failed_reason_idx', 'deliveries_failed_no_reason_idx',
		                    'deliveries_failed_topic_idx', 'deliveries_queued_key_idx') AND i.indisvalid`
	if n := pgtest.Count(t, pool, valid); n != want || want != 12 {
		t.Fatalf("%d valid indexes of indexes.sql's %d, want 12", n, want)
	}
	// What a cancelled CREATE INDEX CONCURRENTLY leaves: an invalid index,
	// which IF NOT EXISTS alone would keep.
	if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'outbox.events_key_idx'::regclass`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Indexes(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.Count(t, pool, valid); n != want {
		t.Errorf("after building again: %d valid indexes, want %d", n, want)
	}
}

// An installation whose outbox.events and outbox.deliveries were made
// partitioned tables (scripts/partitions/convert.sql, the prototype of
// partitioned retention's migration) with every index in place: migrate's
// index step skips what exists. CREATE INDEX CONCURRENTLY IF NOT EXISTS is
// refused on a partitioned table before IF NOT EXISTS is looked at.
func TestMigrations_IndexesSkipTheIndexesAPartitionedTableAlreadyHas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	convert, err := os.ReadFile("../scripts/partitions/convert.sql")
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	for _, line := range strings.Split(string(convert), "\n") {
		if !strings.HasPrefix(line, `\`) { // psql's meta-commands
			sql = append(sql, line)
		}
	}
	pgtest.Exec(t, pool, strings.Join(sql, "\n"))
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_class WHERE oid IN ('outbox.events'::regclass, 'outbox.deliveries'::regclass) AND relkind = 'p'`); n != 2 {
		t.Fatalf("%d of outbox.events and outbox.deliveries partitioned after convert.sql, want 2", n)
	}
	if err := migrations.Indexes(ctx, pool); err != nil {
		t.Fatalf("migrate's index step on the partitioned tables: %v", err)
	}
}

// Every function of the outbox, trigger functions and column defaults
// included, runs with search_path pg_catalog, pg_temp whoever calls it: a
// function a later version adds without it fails here.
func TestMigrations_EveryFunctionOfTheOutboxFixesItsSearchPath(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	rows, err := pool.Query(context.Background(), `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'outbox'::regnamespace
		  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	unfixed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(unfixed) > 0 {
		t.Errorf("functions of the outbox without SET search_path = pg_catalog, pg_temp: %v", unfixed)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_proc WHERE pronamespace = 'outbox'::regnamespace`); n < 10 {
		t.Errorf("%d functions in schema outbox, want the 10 or more it has", n)
	}
}
