package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// searchRows writes n FAILED events of topic orders, one a millisecond
// from base on (the newest last): key k<i%50>, an error that contains
// "needle" for every seventh, and a hostile key and error for the newest.
func searchRows(t *testing.T, pool *pgxpool.Pool, n int, base time.Time) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload, event_type)
		            SELECT 'orders', CASE WHEN i = $1 THEN '<b>k</b>' ELSE 'k' || (i % 50) END, jsonb_build_object('i', i),
		                   CASE WHEN i % 1000 = 0 THEN 'rare.type' ELSE 'common.type' END
		            FROM generate_series(1, $1) i RETURNING id, key, (payload->>'i')::int AS i)
		INSERT INTO outbox.deliveries (event_id, topic, key, status, attempts, failure_reason, last_error, updated_at)
		SELECT id, 'orders', key, 'FAILED', 1, 'INVALID_TOPIC',
		       CASE WHEN i = $1 THEN E'needle <script>alert(1)</script>\x1b[2J'
		            WHEN i % 7 = 0 THEN 'broker said needle ' || i ELSE 'broker said no ' || i END,
		       $2::timestamptz + i * interval '1 millisecond'
		FROM ev`, n, base); err != nil {
		t.Fatal(err)
	}
}

// listed are the event ids a FAILED page lists, in its order.
func listed(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<td><a href="/events/([0-9a-f-]{36})">`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// matchForm is the form of the page's "all matching" actions.
func matchForm(body string) url.Values {
	form := url.Values{}
	start := strings.Index(body, `<input type="hidden" name="match" value="yes">`)
	end := strings.Index(body[start:], "</form>")
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(body[start:start+end], -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return form
}

func ids(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestConsole_FailedEventsAreSearchedByKeyErrorTextAndTimeAsTheDatabaseSays(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	pool.Exec(context.Background(), `DELETE FROM outbox.events`) //nolint:errcheck // serve's rows would only get in the way
	const n = 10100                                              // more than a search reads (10,000)
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	searchRows(t, pool, n, base)
	// The newest 10,000 FAILED rows: a search by key or error reads these.
	window := `SELECT d.event_id::text FROM outbox.deliveries d WHERE d.status = 'FAILED' ORDER BY d.updated_at DESC, d.event_id DESC LIMIT 10000`
	at := func(i int) string { return base.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano) }
	for _, c := range []struct {
		name    string
		query   url.Values
		where   string // the rows it finds
		bounded bool
	}{
		{"ByKey", url.Values{"key": {"k7"}}, `d.key = 'k7' AND d.event_id::text IN (` + window + `)`, true},
		{"ByAHostileKey", url.Values{"key": {"<b>k</b>"}}, `d.key = '<b>k</b>'`, true},
		{"ByErrorText", url.Values{"error_contains": {"needle"}}, `strpos(d.last_error, 'needle') > 0 AND d.event_id::text IN (` + window + `)`, true},
		{"ByTime", url.Values{"since": {at(200)}, "until": {at(300)}},
			`d.updated_at >= '` + at(200) + `' AND d.updated_at < '` + at(300) + `'`, false},
		{"ByErrorTextInATimeRangeItReadsWhole", url.Values{"error_contains": {"needle"}, "since": {at(100)}, "until": {at(5000)}},
			`strpos(d.last_error, 'needle') > 0 AND d.updated_at >= '` + at(100) + `' AND d.updated_at < '` + at(5000) + `'`, false},
		{"ByEventType", url.Values{"event_type": {"rare.type"}}, `d.event_id IN (SELECT id FROM outbox.events WHERE event_type = 'rare.type') AND d.event_id::text IN (` + window + `)`, true},
		{"ByKeyAndErrorText", url.Values{"key": {"k14"}, "error_contains": {"needle"}},
			`d.key = 'k14' AND strpos(d.last_error, 'needle') > 0 AND d.event_id::text IN (` + window + `)`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := ids(t, pool, `SELECT d.event_id::text FROM outbox.deliveries d WHERE d.status = 'FAILED' AND `+c.where+`
				ORDER BY d.updated_at DESC, d.event_id DESC`)
			code, body := get(t, srv, "/failed?"+c.query.Encode(), adminToken)
			if code != http.StatusOK {
				t.Fatalf("%d\n%s", code, body)
			}
			if got := listed(body); !slices.Equal(got, want[:min(len(want), 50)]) {
				t.Errorf("listed %d events %v, want the database's newest %d of %d", len(got), got, min(len(want), 50), len(want))
			}
			wantCount := `<p id="count">` + thousandsOf(int64(len(want))) + ` FAILED events match.`
			if c.bounded { // exact among those it read; older ones may match
				wantCount = `<p id="count">≥ ` + thousandsOf(int64(len(want))) + ` FAILED events match among the newest 10,000 that match the other filters.`
			}
			if !strings.Contains(body, wantCount) {
				t.Errorf("the page's count is not %q:\n%s", wantCount, body[strings.Index(body, `<p id="count">`):][:300])
			}
			if strings.Contains(body, `id="bound"`) != c.bounded {
				t.Errorf("the page says it bounded the search: %v, want %v", !c.bounded, c.bounded)
			}
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "\x1b") || strings.Contains(body, "<b>k</b>") {
				t.Errorf("a key or error shown as markup or a raw control character")
			}
			// The actions on all matching change exactly those rows.
			form := matchForm(body)
			code, confirm := postForm(t, srv, "/skip", adminToken, form, "")
			if code != http.StatusOK || !strings.Contains(confirm, thousandsOf(int64(len(want)))+" event") {
				t.Fatalf("the confirmation of skipping them: %d, want %d events\n%s", code, len(want), confirm)
			}
		})
	}
}

func TestConsole_SkippingASearchChangesExactlyTheRowsItListedThatStillMatch(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	pool.Exec(context.Background(), `DELETE FROM outbox.events`) //nolint:errcheck // serve's rows would only get in the way
	searchRows(t, pool, 10100, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	_, body := get(t, srv, "/failed?"+url.Values{"error_contains": {"needle"}}.Encode(), adminToken)
	form := matchForm(body)
	if form.Get("since") == "" || form.Get("until") == "" || form.Get("error_contains") != "needle" {
		t.Fatalf("the search's form does not carry its bound and filter: %v", form)
	}
	shown := ids(t, pool, `SELECT d.event_id::text FROM outbox.deliveries d WHERE d.status = 'FAILED' AND strpos(d.last_error, 'needle') > 0
		AND d.updated_at >= $1 AND d.updated_at < $2`, form.Get("since"), form.Get("until"))
	// Meanwhile one of them is resent, and older ones that match fail again
	// (they are not what the page showed).
	pool.Exec(context.Background(), `UPDATE outbox.deliveries SET status = 'PENDING' WHERE event_id = $1`, shown[0]) //nolint:errcheck
	form.Set("confirm", "yes")
	if code, body := postForm(t, srv, "/skip", adminToken, form, ""); code != http.StatusSeeOther {
		t.Fatalf("skip: %d\n%s", code, body)
	}
	skipped := ids(t, pool, `SELECT event_id::text FROM outbox.deliveries WHERE status = 'SKIPPED' ORDER BY updated_at DESC`)
	if want := len(shown) - 1; len(skipped) != want || slices.Contains(skipped, shown[0]) {
		t.Errorf("skipped %d, want the %d listed that still matched", len(skipped), want)
	}
	for _, id := range skipped {
		if !slices.Contains(shown, id) {
			t.Fatalf("skipped %s, which the search did not list", id)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED' AND strpos(last_error, 'needle') > 0`); n == 0 {
		t.Errorf("the older events that match, past the search's bound, were skipped too")
	}
	var logged string
	_ = pool.QueryRow(context.Background(), `SELECT filter::text FROM outbox.console_actions ORDER BY id DESC LIMIT 1`).Scan(&logged)
	if !strings.Contains(logged, `"error_contains": "needle"`) || !strings.Contains(logged, `"since"`) {
		t.Errorf("the action log's filter %s lacks the search", logged)
	}
}

func TestConsole_ASearchsBadInputIsA400NamingTheParameter(t *testing.T) {
	t.Parallel()
	srv, _, _ := serve(t, "")
	for _, c := range []struct{ path, name string }{
		{"/failed?key=a%00b", "key"},
		{"/failed?error_contains=%ff%fe", "error_contains"},
		{"/failed?since=2026-11-26T10:00:00Z&until=2026-11-26T09:00:00Z", "until"},
		{"/failed?since=10am", "since"},
	} {
		code, body := get(t, srv, c.path, readToken)
		if code != http.StatusBadRequest || !strings.Contains(body, c.name) || strings.Contains(body, "SQLSTATE") {
			t.Errorf("%s: %d %q, want 400 naming %s", c.path, code, body, c.name)
		}
	}
	form := url.Values{"match": {"yes"}, "since": {"2026-11-26T10:00:00Z"}, "until": {"2026-11-26T09:00:00Z"}}
	if code, body := postForm(t, srv, "/skip", adminToken, form, ""); code != http.StatusBadRequest || !strings.Contains(body, "until") {
		t.Errorf("skip all matching from > to: %d %q, want 400 naming until", code, body)
	}
}

func TestConsole_ARareTypeIsSearchedAmongTheNewestFailedEventsThenTheOnesBefore(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	pool.Exec(context.Background(), `DELETE FROM outbox.events`) //nolint:errcheck // serve's rows would only get in the way
	searchRows(t, pool, 10100, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	// The type of the three oldest only: a search that read every FAILED
	// row to fill its page would find them, reading 10,100 rows.
	want := ids(t, pool, `UPDATE outbox.events SET event_type = 'ancient.type' WHERE (payload->>'i')::int <= 3 RETURNING id::text`)
	_, body := get(t, srv, "/failed?event_type=ancient.type", readToken)
	if got := listed(body); len(got) != 0 || !strings.Contains(body, `id="bound"`) {
		t.Fatalf("a rare type among the newest 10,000: listed %d, bound said %v; want none, and the bound", len(got), strings.Contains(body, `id="bound"`))
	}
	before := regexp.MustCompile(`<a id="search-before" href="([^"]*)"`).FindStringSubmatch(body)
	if before == nil {
		t.Fatal("no link to search the ones before")
	}
	_, body = get(t, srv, html.UnescapeString(before[1]), readToken)
	got := listed(body)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || !strings.Contains(body, `<p id="count">3 FAILED events match.`) {
		t.Errorf("the ones before: listed %v, want %v", got, want)
	}
}

// A confirmation asked for without the list's bound (a form of its own, or
// a bookmark) of every FAILED event of a key counts what the list of that
// key counts, among the newest 10,000, not every row of the key (on
// 250,000 FAILED that count took a second); the confirmed action changes
// those.
func TestConsole_AConfirmationOfASearchWithoutItsBoundIsBoundedAsTheListIs(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	pool.Exec(context.Background(), `DELETE FROM outbox.events`) //nolint:errcheck // serve's rows would only get in the way
	searchRows(t, pool, 10100, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	_, list := get(t, srv, "/failed?key=k1", readToken)
	count := regexp.MustCompile(`<p id="count">(?:≥ )?([0-9,]+) FAILED events match`).FindStringSubmatch(list)
	if count == nil || !strings.Contains(list, `id="bound"`) {
		i := strings.Index(list, `id="count"`)
		t.Fatalf("the list of key k1 is not bounded: %q", list[max(0, i-10):min(len(list), i+600)])
	}
	code, body := postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "key": {"k1"}}, "")
	if code != http.StatusOK || !strings.Contains(body, `<p id="confirm-count">`+count[1]+` events would change`) ||
		!strings.Contains(body, "that failed at or after") {
		t.Fatalf("the confirmation: %d, want %s events that failed at or after the bound:\n%.1500s", code, count[1], body)
	}
	confirm := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
		confirm.Add(m[1], html.UnescapeString(m[2]))
	}
	if code, _ := postForm(t, srv, "/skip", adminToken, confirm, ""); code != http.StatusSeeOther {
		t.Fatalf("confirming: %d", code)
	}
	var skipped string
	if err := pool.QueryRow(context.Background(), `SELECT to_char(count(*), 'FM999,999') FROM outbox.deliveries WHERE status = 'SKIPPED'`).Scan(&skipped); err != nil {
		t.Fatal(err)
	}
	if skipped != count[1] {
		t.Errorf("skipped %s, the confirmation said %s", skipped, count[1])
	}
}
