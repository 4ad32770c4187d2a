package store

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// consoleRows writes what the console's tests read: one event of topic
// rare, then common events over ten keys (k0..k9), each with a status row:
// SENT, but the first failed of the common ones FAILED and the next
// pending PENDING.
//
// It writes on a connection of its own, ends it, and waits for its counts
// to reach the statistics before it runs ANALYZE: a session sends its
// counts of inserted rows up to a second after its statements (they wait
// while it sent some in the last 500 ms on PostgreSQL 14, a second from
// 15), and counts that arrive after another session's ANALYZE are added to
// the live rows ANALYZE counted. The overview then read 10,002 rows in a
// table of 5,001 (TestOverviewCounts_..., once in CI on PostgreSQL 14;
// psql: an INSERT of 5,001 rows, ANALYZE from another session within the
// 500 ms, then any statement of the first: n_live_tup 10,002 on 14 and 15).
func consoleRows(t *testing.T, pool *pgxpool.Pool, common, failed, pending int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO outbox.events (topic, key, payload, event_type) VALUES ('rare', 'r', '{}', 'rare.type')`,
		`INSERT INTO outbox.events (topic, key, payload, event_type)
			SELECT 'common', 'k' || (n % 10), '{}', 'common.type' FROM generate_series(1, ` + strconv.Itoa(common) + `) n ORDER BY n`,
		`INSERT INTO outbox.deliveries (event_id, status, attempts, seq) SELECT id, 'SENT', 1, seq FROM outbox.events`,
		`UPDATE outbox.deliveries d SET status = 'FAILED', failure_reason = 'MESSAGE_TOO_LARGE', topic = e.topic, key = e.key
			FROM (SELECT id, topic, key FROM outbox.events WHERE topic = 'common' ORDER BY seq LIMIT ` + strconv.Itoa(failed) + `) e
			WHERE d.event_id = e.id`,
		`UPDATE outbox.deliveries d SET status = 'PENDING', topic = e.topic, key = e.key, commit_lsn = '0/1', tx_position = 0
			FROM (SELECT id, topic, key FROM outbox.events WHERE topic = 'common' ORDER BY seq OFFSET ` + strconv.Itoa(failed) +
			` LIMIT ` + strconv.Itoa(pending) + `) e WHERE d.event_id = e.id`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := conn.Hijack().Close(ctx); err != nil { // a session sends its counts as it ends
		t.Fatal(err)
	}
	rows := common + 1
	pgtest.Eventually(t, 10*time.Second, "the inserts into outbox.deliveries counted in the statistics", func() (bool, string) {
		ins := pgtest.Count(t, pool, `SELECT coalesce((SELECT n_tup_ins FROM pg_stat_all_tables WHERE relid = 'outbox.deliveries'::regclass), 0)`)
		return ins >= rows, fmt.Sprintf("%d of %d rows", ins, rows)
	})
	execAll(t, pool, `ANALYZE outbox.deliveries`)
}

func TestOverviewCounts_AreExactOnASmallTableAndBoundedOnABigOne(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	consoleRows(t, pool, 5000, 30, 5)
	st := New(pool)
	ctx := context.Background()

	exact, err := st.OverviewCounts(ctx, OverviewBounds{Outstanding: 100, Sample: 10000})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Count{"SENT": {N: 4966}, "FAILED": {N: 30}, "PENDING": {N: 5}}
	for st, c := range want {
		if exact.Totals[st] != c {
			t.Errorf("a table of 5,001 rows within a sample of 10,000: %s %+v, want %+v", st, exact.Totals[st], c)
		}
	}
	if exact.Sampled || len(exact.Topics) != 2 || exact.Topics[0].Topic != "common" || exact.Topics[0].ByStatus["SENT"] != (Count{N: 4965}) {
		t.Errorf("by topic: %+v (sampled %v), want common's 4,965 SENT counted", exact.Topics, exact.Sampled)
	}

	// Bounds far below the table: PENDING still counted (5 < 10), FAILED
	// past its bound, SENT estimated from about 500 rows.
	bounded, err := st.OverviewCounts(ctx, OverviewBounds{Outstanding: 10, Sample: 500})
	if err != nil {
		t.Fatal(err)
	}
	if !bounded.Sampled || bounded.Rows < 4000 {
		t.Fatalf("not sampled, or the statistics' row count %d is off 5,001", bounded.Rows)
	}
	if c := bounded.Totals["PENDING"]; c != (Count{N: 5}) {
		t.Errorf("PENDING under its bound: %+v, want exactly 5", c)
	}
	if c := bounded.Totals["FAILED"]; c.N < 10 || !(c.AtLeast || c.Estimated) {
		t.Errorf("FAILED past its bound of 10: %+v, want at least 10, marked", c)
	}
	if c := bounded.Totals["SENT"]; !c.Estimated || c.N < 4966/2 || c.N > 4966*2 {
		t.Errorf("SENT from a sample: %+v, want an estimate of about 4,966", c)
	}
}

func TestEventsPage_AFilterFewRowsMatchSearchesABoundedWalkAPage(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	consoleRows(t, pool, 3000, 20, 0)
	st := New(pool)
	ctx := context.Background()

	// The rare topic's one event is among the oldest (ids written in the
	// same millisecond are not ordered): 3,001 rows, 1,000 a page.
	var found []EventRow
	before, pages := "", 0
	for {
		p, err := st.EventsPage(ctx, EventFilter{Topic: "rare"}, before, false, 50, 1000)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		found = append(found, p.Rows...)
		if p.Before == "" {
			break
		}
		if !p.Walked || pages > 5 {
			t.Fatalf("page %d: %d rows, walked %v, next %q: want empty walked pages until the rare event", pages, len(p.Rows), p.Walked, p.Before)
		}
		before = p.Before
	}
	if len(found) != 1 || found[0].Topic != "rare" || found[0].EventType != "rare.type" || pages != 4 {
		t.Errorf("found %+v in %d pages, want the rare event, the walk ending on the 4th", found, pages)
	}

	// Unfiltered: full pages, not marked.
	p, err := st.EventsPage(ctx, EventFilter{}, "", false, 50, 1000)
	if err != nil || len(p.Rows) != 50 || p.Walked || p.Before != p.Rows[49].EventID {
		t.Fatalf("unfiltered: %v, %d rows, walked %v", err, len(p.Rows), p.Walked)
	}

	// A key (300 events) and a status its oldest 2 have: the key's walk.
	var failed int
	before = ""
	for range 5 {
		p, err := st.EventsPage(ctx, EventFilter{Key: "k3", Status: "FAILED"}, before, false, 50, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			if r.Key != "k3" || r.Status != "FAILED" || r.Reason != "MESSAGE_TOO_LARGE" {
				t.Errorf("key k3, FAILED: got %+v", r)
			}
		}
		failed += len(p.Rows)
		if before = p.Before; before == "" {
			break
		}
	}
	if failed != 2 || before != "" {
		t.Errorf("key k3's FAILED events: %d (walk ended: %v), want 2", failed, before == "")
	}
}

func TestEventsPage_ReadsNoMoreStatusRowsThanItsWalk(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	consoleRows(t, pool, 3000, 20, 0)
	for _, tc := range []struct {
		name string
		args []any
	}{
		{"a topic no row has", []any{nil, nil, "none", nil, nil, nil, nil, nil, 51, 500}},
		{"an event type no row has", []any{nil, nil, nil, nil, "none", nil, nil, nil, 51, 500}},
		{"status SKIPPED", []any{nil, "SKIPPED", nil, nil, nil, nil, nil, nil, 51, 500}},
		// FAILED rows are the oldest: a walk of the primary key hoping to
		// meet them soon reads the whole table.
		{"status FAILED", []any{nil, "FAILED", nil, nil, nil, nil, nil, nil, 51, 500}},
	} {
		var plan []byte
		if err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+eventsPageSQL, tc.args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		var read float64
		for _, n := range planNodes(t, plan) {
			if n.Relation == "deliveries" {
				read += (n.Rows + n.Filtered) * n.Loops
			}
		}
		if read > 500 || (tc.args[1] == "FAILED" && read > 51) {
			t.Errorf("%s: read %.0f status rows of 3,001, want at most the walk's 500", tc.name, read)
		}
	}
}
