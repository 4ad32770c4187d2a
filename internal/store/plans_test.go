package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// planNode is a node of EXPLAIN (FORMAT JSON), with what the tests read.
type planNode struct {
	NodeType   string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Rows       float64    `json:"Actual Rows"`
	Loops      float64    `json:"Actual Loops"`
	Filtered   float64    `json:"Rows Removed by Filter"`
	JoinFilter float64    `json:"Rows Removed by Join Filter"`
	IndexCond  string     `json:"Index Cond"`
	Plans      []planNode `json:"Plans"`
}

// planNodes reads an EXPLAIN (FORMAT JSON) result and returns every node of
// its plans, each before its children.
func planNodes(t *testing.T, plan []byte) []planNode {
	t.Helper()
	var root []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &root); err != nil {
		t.Fatalf("reading plan: %v", err)
	}
	var nodes []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		nodes = append(nodes, n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	for _, r := range root {
		walk(r.Plan)
	}
	return nodes
}

// planScans lists the relations a plan reads with a sequential scan.
func planScans(t *testing.T, plan []byte) []string {
	t.Helper()
	var seq []string
	for _, n := range planNodes(t, plan) {
		if n.NodeType == "Seq Scan" {
			seq = append(seq, n.Relation)
		}
	}
	return seq
}

// execAll runs each statement in turn.
func execAll(t *testing.T, pool *pgxpool.Pool, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// queuePending writes n events to topic orders over keys keys, each with a
// PENDING row, due now.
func queuePending(t *testing.T, pool *pgxpool.Pool, n, keys int) {
	t.Helper()
	execAll(t, pool,
		fmt.Sprintf(`INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k' || (n %% %d), '{}' FROM generate_series(1, %d) n`, keys, n),
		`INSERT INTO outbox.deliveries (event_id, status, topic, key, commit_lsn, tx_position, seq)
			SELECT id, 'PENDING', topic, key, '0/0', 0, seq FROM outbox.events`)
}

// explainClaim runs a claim of batch rows under EXPLAIN ANALYZE, in a
// transaction it rolls back, and returns the plan as JSON.
func explainClaim(t *testing.T, pool *pgxpool.Pool, batch int, hold bool) []byte {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only explained
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+claimSQL, "me", batch, nil, hold).Scan(&plan); err != nil {
		t.Fatalf("explaining the claim: %v", err)
	}
	return plan
}

// A queue drained since the planner last sampled the table looks, to the
// planner, like tens of thousands of unfinished rows per key. The poller's
// claim and the stream's queued-keys statement must still read only the
// rows they take, through the indexes: a sequential scan there reads the
// whole outbox on every claim (under a spill drain, claims of 1 to 5 s and
// a queued-keys refresh of 50 ms per key, with the stream paused meanwhile).
func TestPlans_ClaimAndQueuedKeysReadTheIndexesWhateverTheStatisticsSay(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	ctx := context.Background()
	queuePending(t, pool, 60000, 20)
	execAll(t, pool, `ANALYZE outbox.events`, `ANALYZE outbox.deliveries`,
		`UPDATE outbox.deliveries SET status = 'SENT' WHERE seq <= 57000`)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, st := range []struct {
		name, sql, params string
		args              []string
	}{
		{"claim", claimSQL, "text, int, timestamptz, boolean", []string{"'me', 500, NULL, false", "'me', 500, NULL, true"}},
		{"queued_keys", queuedKeysSQL, "int", []string{"1000"}},
		{"queued_keys_continue", queuedKeysContinueSQL, "int", []string{"1000"}},
	} {
		if _, err := conn.Exec(ctx, "PREPARE "+st.name+" ("+st.params+") AS "+st.sql); err != nil {
			t.Fatalf("preparing %s: %v", st.name, err)
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			for _, args := range st.args {
				var plan []byte
				if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+st.name+"("+args+")").Scan(&plan); err != nil {
					t.Fatalf("explaining %s(%s): %v", st.name, args, err)
				}
				if seq := planScans(t, plan); len(seq) > 0 {
					t.Errorf("%s(%s), %s: sequential scan of %s, want index reads only", st.name, args, mode, strings.Join(seq, ", "))
				}
			}
		}
	}
}

// planWork is the rows a plan's nodes produced or filtered out, over all
// their loops: what it read and compared, whatever its estimates were.
func planWork(t *testing.T, plan []byte) float64 {
	t.Helper()
	var work float64
	for _, n := range planNodes(t, plan) {
		work += (n.Rows + n.Filtered + n.JoinFilter) * n.Loops
	}
	return work
}

// Statistics taken while the outbox was empty (a new install, a test
// database from a template) say every index holds a row or two. A claim on
// the queue that then builds up may read the queue once (its due rows, in a
// plan made for few), but never the queue times the batch: planned for one
// row, the lock step re-ran the key-run window for every due row (2,032 x
// 439 rows compared per claim, 1.6 s; a spill drain of 7,000 events took
// 44 s instead of 3).
func TestPlans_AClaimPlannedOnStatisticsOfAnEmptyOutboxDoesNotReadTheQueueOncePerRow(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	const queued, batch = 4000, 500
	execAll(t, pool, `VACUUM ANALYZE outbox.events, outbox.deliveries`)
	queuePending(t, pool, queued, 200)
	for _, hold := range []bool{false, true} {
		plan := explainClaim(t, pool, batch, hold)
		work := planWork(t, plan)
		t.Logf("FIGURES hold=%v: a claim of %d from %d queued rows over 200 keys: %.0f rows produced or compared", hold, batch, queued, work)
		if work > 10*queued {
			t.Errorf("hold=%v: the claim produced or compared %.0f rows to take %d of %d, want at most %d", hold, work, batch, queued, 10*queued)
		}
	}
}

// A claim's cost grows with the rows it takes, not with their square: the
// poller drains faster with larger batches, never slower. Each claimed row
// was compared with every other (planned on a CTE's estimate of two rows,
// the UPDATE joined taken inside a loop: 3,998,000 comparisons to claim
// 2,000, 0.9 s), and each event was probed with id = ANY (the batch's ids),
// an array prepared again for every row; a claim of 2,000 took twelve times
// as long as one of 500.
func TestPlans_AClaimDoesNotCompareEveryRowItTakesWithEveryOther(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	const queued, batch = 6000, 2000
	queuePending(t, pool, queued, 1000)
	execAll(t, pool, `VACUUM ANALYZE outbox.events, outbox.deliveries`)
	plan := explainClaim(t, pool, batch, false)
	work := planWork(t, plan)
	t.Logf("FIGURES a claim of %d from %d queued rows over 1,000 keys: %.0f rows produced or compared", batch, queued, work)
	if work > 50*batch {
		t.Errorf("the claim produced or compared %.0f rows to take %d, want at most %d", work, batch, 50*batch)
	}
	for _, n := range planNodes(t, plan) {
		if n.Loops > 1 && strings.Contains(n.IndexCond, "ANY") {
			t.Errorf("%s on %s runs %.0f times with an array condition, prepared again each time: %s", n.NodeType, n.Relation, n.Loops, n.IndexCond)
		}
	}
}

func TestPlans_ASweepRoundInPollModeSortsOnlyTheEventsOfItsWindow(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	const transactions, batch = 200, 2000
	for range transactions { // the bench's events: about 500 bytes each
		execAll(t, pool, `INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (n % 100), jsonb_build_object('n', n, 'note', repeat('x', 380)) FROM generate_series(1, 1000) n`)
	}
	// outbox.deliveries as a poll-mode relay's first sweep finds it: never
	// analyzed (planned as ten pages), so anti-joined by hash.
	execAll(t, pool, `VACUUM ANALYZE outbox.events`)
	ctx := context.Background()
	from, upper := time.Now().Add(-time.Hour), time.Now().Add(time.Minute)
	explain := func(sql string, args ...any) float64 {
		t.Helper()
		var plan []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
			t.Fatalf("explaining: %v", err)
		}
		return planWork(t, plan)
	}
	end, windowed, err := New(pool).SweepWindow(ctx, from, upper, batch)
	if err != nil || !windowed {
		t.Fatalf("sweep window: %v (windowed %v), want the end of the first %d events", err, windowed, batch)
	}
	work := explain(sweepWindowSQL, from, upper, batch) + explain(sweepEventsSQL, from, end, batch, false)
	whole := explain(sweepEventsSQL, from, upper, batch, false)
	// Here the planner walks the created_at index even without the window;
	// on the bench's database it sorted every event up to the horizon for
	// each round (sweep_events.sql), which the window makes impossible.
	t.Logf("FIGURES a poll-mode sweep round of %d of %d events: %.0f rows produced or compared (%.0f without the window, as planned here)",
		batch, transactions*1000, work, whole)
	if work > 20*batch {
		t.Errorf("the sweep round produced or compared %.0f rows to take %d, want at most %d", work, batch, 20*batch)
	}
}

// A backfill page reads each of its events, and whether it has a status row,
// by key, however many rows outbox.deliveries holds. The backfill fills that
// table as it goes: a page planned as a hash join read all of it for every
// page (170 ms for a page of 5,000 against 500,000 rows, 12 ms by key), so
// each page of a 1,000,000-event backfill cost more than the one before.
func TestPlans_ABackfillPageReadsItsEventsAndTheirRowsByKey(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	const events, delivered, page = 40000, 30000, 4000
	ids := pgtest.InsertEvents(t, pool, events)
	execAll(t, pool,
		fmt.Sprintf(`INSERT INTO outbox.deliveries (event_id, status, attempts, sent_at)
			SELECT id, 'SENT', 1, now() FROM outbox.events ORDER BY seq LIMIT %d`, delivered),
		`VACUUM ANALYZE outbox.events, outbox.deliveries`)
	var plan []byte // planned for these ids, as the relay's pool plans every statement
	if err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+backfillEventsSQL,
		ids[delivered:delivered+page]).Scan(&plan); err != nil {
		t.Fatalf("explaining: %v", err)
	}
	work := planWork(t, plan)
	t.Logf("FIGURES a backfill page of %d events, %d status rows in the table: %.0f rows produced or compared", page, delivered, work)
	if seq := planScans(t, plan); len(seq) > 0 {
		t.Errorf("sequential scan of %s, want each event and its row read by key", strings.Join(seq, ", "))
	}
	if work > 10*page {
		t.Errorf("the page produced or compared %.0f rows to read %d, want at most %d", work, page, 10*page)
	}
}

// Under --failed-key-policy continue a FAILED row holds no key, so the
// stream's refresh of its queued keys (every second between batches) must
// not read the FAILED rows: with 20,000 keys FAILED and 3 keys queued it
// reads about the queued keys' rows. It used to walk every key with a
// FAILED row (20,000 index descents a refresh, 131 ms at 20,000 FAILED,
// the stream's p99 at 1,000/s in seconds as FAILED rows piled up).
func TestPlans_QueuedKeysUnderContinueReadNoFailedRow(t *testing.T) {
	_, pool := pgtest.Migrated(t)
	ctx := context.Background()
	execAll(t, pool,
		`INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'f' || n, '{}' FROM generate_series(1, 20000) n`,
		`INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'q' || (n % 3), '{}' FROM generate_series(1, 30) n`,
		`INSERT INTO outbox.deliveries (event_id, status, attempts, topic, key, commit_lsn, tx_position, seq)
			SELECT id, CASE WHEN key LIKE 'f%' THEN 'FAILED' ELSE 'PENDING' END, CASE WHEN key LIKE 'f%' THEN 1 ELSE 0 END,
			       topic, key, '0/0', 0, seq FROM outbox.events`,
		`ANALYZE outbox.deliveries`)
	keys, err := New(pool).QueuedKeys(ctx, false, 1000)
	if err != nil || len(keys) != 3 {
		t.Fatalf("queued keys under continue: %v, %v; want q0, q1, q2", keys, err)
	}
	var plan []byte
	sql, args := queuedKeys(false, 1000)
	if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	read := 0.0
	for _, n := range planNodes(t, plan) {
		if strings.Contains(n.NodeType, "Scan") {
			read += (n.Rows + n.Filtered) * n.Loops
		}
	}
	if read > 500 {
		t.Errorf("a refresh of 3 queued keys read %.0f rows (20,000 keys FAILED), want the queued keys' rows only", read)
	}
}

// TestPlans_ARetentionStepReadsItsBatchByKey plans a retention step (of
// events, and of mapped events' status rows) on 100,000 old SENT events and
// 100,000 mapped status rows, analyzed, under EXPLAIN: neither reads a
// table whole. Planned on outbox.retention_walk's default estimate of 1,000
// rows a call, a step hashed both tables, a sequential scan of each (62 to
// 85 ms a step at 100,000 events, against 3 ms before the function; below
// some tens of thousands of rows the planner hashes either way).
func TestPlans_ARetentionStepReadsItsBatchByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	execAll(t, pool,
		`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
			SELECT 'orders', '{}', now() - interval '10 days' + i * interval '1 ms' FROM generate_series(1, 100000) i RETURNING id)
			INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`,
		`INSERT INTO outbox.deliveries (event_id, status, attempts, source, topic, created_at)
			SELECT outbox.event_id('public.t', i::text), 'SENT', 1, 'public.t', 'orders', now() - interval '10 days' + i * interval '1 ms'
			FROM generate_series(1, 100000) i`,
		`ANALYZE outbox.events`, `ANALYZE outbox.deliveries`, `ANALYZE outbox.mapped_events`)
	for name, sql := range map[string]string{"events": retentionSQL, "mapped": retentionMappedSQL} {
		for _, skipLocked := range []bool{false, true} {
			var plan []byte
			if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, time.Time{}, time.Now().Add(-7*24*time.Hour), 100, 0, skipLocked).
				Scan(&plan); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, rel := range planScans(t, plan) {
				if rel != "mapped_events" { // empty here: the copies of events not sent on their first try
					t.Errorf("a retention step over %s (skipping locked rows: %v) reads %s whole: %s", name, skipLocked, rel, plan)
				}
			}
		}
	}
}
