package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// scaleFailed is how many FAILED rows TestConsole_AtScale builds: the
// 250,000 of an incident, or 25,000 under -short (OUTBOX_TEST_SCALE_FAILED
// sets another number).
func scaleFailed(t *testing.T) int {
	if v := os.Getenv("OUTBOX_TEST_SCALE_FAILED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2000 {
			t.Fatalf("OUTBOX_TEST_SCALE_FAILED=%q: a number, 2000 at least", v)
		}
		return n
	}
	if testing.Short() {
		return 25000
	}
	return 250000
}

// incidentRows writes n FAILED events over five topics and four reasons,
// skewed as in an incident: the first 80% (also the first rows on disk)
// on topic orders with INVALID_TOPIC, the rest over three topics with four
// reasons, and 600 on topic rare; then 5,123 SKIPPED on orders and 20,000
// SENT (without a topic on the status row, as the stream writes them).
// Each FAILED event failed 10 ms after the next one.
func incidentRows(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	big := n * 8 / 10
	stmts := []string{
		fmt.Sprintf(`INSERT INTO outbox.events (id, topic, key, payload, event_type, created_at)
			SELECT md5('e' || i)::uuid,
			       CASE WHEN i <= %[1]d THEN 'orders' WHEN i > %[2]d - 600 THEN 'rare' ELSE 'topic-' || (i %% 3) END,
			       'k' || (i %% 8000), '{}', CASE WHEN i %% 5 = 0 THEN 'order.cancelled' ELSE 'order.placed' END,
			       now() - i * interval '10 ms'
			FROM generate_series(1, %[2]d) i`, big, n),
		fmt.Sprintf(`INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, topic, key,
			                                   commit_lsn, tx_position, updated_at)
			SELECT e.id, 'FAILED', 1,
			       CASE WHEN i <= %[1]d THEN 'INVALID_TOPIC'
			            ELSE (ARRAY['INVALID_TOPIC', 'MESSAGE_TOO_LARGE', 'INVALID_EVENT', 'RETRIES_EXHAUSTED'])[1 + i %% 4] END,
			       'broker said no', e.topic, e.key, '0/0', 0, now() - i * interval '10 ms'
			FROM generate_series(1, %[2]d) i JOIN outbox.events e ON e.id = md5('e' || i)::uuid`, big, n),
		`INSERT INTO outbox.events (id, topic, key, payload, created_at)
			SELECT md5('s' || i)::uuid, 'orders', 'k' || i, '{}', now() FROM generate_series(1, 5123) i`,
		`INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, topic, key, commit_lsn, tx_position)
			SELECT md5('s' || i)::uuid, 'SKIPPED', 1, 'INVALID_TOPIC', 'orders', 'k' || i, '0/0', 0 FROM generate_series(1, 5123) i`,
		`INSERT INTO outbox.events (id, topic, payload) SELECT md5('t' || i)::uuid, 'topic-1', '{}' FROM generate_series(1, 20000) i`,
		`INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT md5('t' || i)::uuid, 'SENT', 1 FROM generate_series(1, 20000) i`,
		`ANALYZE outbox.events`, `ANALYZE outbox.deliveries`,
	}
	for _, s := range stmts {
		if _, err := pool.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// shownCount reads a count as a page shows it: exact ("12,345"), or a
// lower bound ("≥ 10,000", maybe with an estimate after it).
func shownCount(s string) (n int64, atLeast bool, err error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "≥ "); ok {
		s, atLeast = rest, true
		s, _, _ = strings.Cut(s, " ")
	}
	n, err = strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n, atLeast, err
}

// agrees says whether a count a page shows agrees with the database's
// want: equal, or a lower bound at the bound, no more than want.
func agrees(shown string, want int64, bound int64) bool {
	n, atLeast, err := shownCount(shown)
	if err != nil {
		return false
	}
	if atLeast {
		return n >= bound && n <= want
	}
	return n == want
}

var (
	plainLink = regexp.MustCompile(`<a href="[^"]*">([^<]*)</a>`)
	countsRow = regexp.MustCompile(`<tr><td>([^<]*)</td><td>([^<]*)</td>((?:<td class="n">[^<]*</td>)+)</tr>`)
	cell      = regexp.MustCompile(`<td class="n">([^<]*)</td>`)
	reasonRow = regexp.MustCompile(`<tr><td><a href="[^"]*">([^<]*)</a></td><td class="n">([^<]*)</td></tr>`)
	countLine = regexp.MustCompile(`<p id="count">([^<]*) FAILED events match`)
	eventLink = regexp.MustCompile(`<td><a href="/events/([0-9a-f-]{36})">`)
	nextLink  = regexp.MustCompile(`<a id="next" href="([^"]*)">`)
	prevLink  = regexp.MustCompile(`<a id="prev" href="([^"]*)">`)
)

// unlink is page without its links: each link's text in its place.
func unlink(page string) string { return plainLink.ReplaceAllString(page, "$1") }

func TestConsole_AtScale_EveryCountAndPageAgreesWithTheDatabase(t *testing.T) {
	t.Parallel()
	n := scaleFailed(t)
	dbURL, pool := pgtest.Migrated(t)
	incidentRows(t, pool, n)
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL))), console.Config{ReadToken: readToken, AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, c.Handler())
	ctx := context.Background()
	const bound = 10000 // store.OverviewBoundsDefault.Outstanding, and the reasons'

	// The overview: every topic with rows of a status shows them, within
	// the bound; every FAILED reason is listed.
	code, body := get(t, srv, "/", readToken)
	if code != http.StatusOK {
		t.Fatalf("overview: %d\n%s", code, body)
	}
	shown := map[[2]string]string{} // topic, status: the cell
	plain := unlink(body)           // the names and counts without their links
	for _, m := range countsRow.FindAllStringSubmatch(plain, -1) {
		for i, c := range cell.FindAllStringSubmatch(m[3], -1) {
			shown[[2]string{html.UnescapeString(m[2]), store.Statuses()[i]}] = html.UnescapeString(c[1])
		}
	}
	rows, err := pool.Query(ctx, `SELECT coalesce(d.topic, e.topic), d.status, count(*) FROM outbox.deliveries d
		JOIN outbox.events e ON e.id = d.event_id WHERE d.status <> 'SENT' GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for rows.Next() {
		var topic, status string
		var want int64
		if err := rows.Scan(&topic, &status, &want); err != nil {
			t.Fatal(err)
		}
		groups++
		if got := shown[[2]string{topic, status}]; !agrees(got, want, bound) {
			t.Errorf("overview: topic %s, %s: shows %q, the database has %d (exact to %d, past it ≥)", topic, status, got, want, bound)
		}
	}
	if rows.Err() != nil || groups != 6 {
		t.Fatalf("the fixture: %d topic and status groups, want 6 (%v)", groups, rows.Err())
	}
	total := func(status string) int64 {
		return int64(pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = '`+status+`'`))
	}
	for _, st := range []string{"FAILED", "SKIPPED", "PENDING"} {
		m := regexp.MustCompile(`id="total-` + st + `">([^<]*)<`).FindStringSubmatch(plain)
		if m == nil || !agrees(html.UnescapeString(m[1]), total(st), bound) {
			t.Errorf("overview: total %s shows %q, the database has %d", st, m, total(st))
		}
	}
	reasons := map[string]string{}
	for _, m := range reasonRow.FindAllStringSubmatch(body, -1) {
		reasons[m[1]] = html.UnescapeString(m[2])
	}
	for _, r := range []string{"INVALID_TOPIC", "MESSAGE_TOO_LARGE", "INVALID_EVENT", "RETRIES_EXHAUSTED"} {
		want := int64(pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED' AND failure_reason = '`+r+`'`))
		if !agrees(reasons[r], want, bound) {
			t.Errorf("overview: FAILED for %s shows %q, the database has %d", r, reasons[r], want)
		}
	}

	// Each topic's and reason's FAILED list: its count, and the newest
	// failure first.
	newest := func(where string) string {
		var id string
		if err := pool.QueryRow(ctx, `SELECT event_id::text FROM outbox.deliveries WHERE status = 'FAILED' AND `+where+
			` ORDER BY updated_at DESC, event_id DESC LIMIT 1`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, f := range []struct{ param, value, where string }{
		{"topic", "orders", "topic = 'orders'"}, {"topic", "topic-0", "topic = 'topic-0'"}, {"topic", "topic-1", "topic = 'topic-1'"},
		{"topic", "topic-2", "topic = 'topic-2'"}, {"topic", "rare", "topic = 'rare'"},
		{"reason", "INVALID_TOPIC", "failure_reason = 'INVALID_TOPIC'"}, {"reason", "INVALID_EVENT", "failure_reason = 'INVALID_EVENT'"},
		{"event_type", "order.cancelled", "event_id IN (SELECT id FROM outbox.events WHERE event_type = 'order.cancelled')"},
	} {
		code, body := get(t, srv, "/failed?"+url.Values{f.param: {f.value}}.Encode(), readToken)
		want := int64(pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED' AND `+f.where))
		m := countLine.FindStringSubmatch(body)
		bound := int64(100000) // the list's
		if f.param == "event_type" {
			bound = 1 // of the newest 10,000 FAILED: some, not none
		}
		if code != http.StatusOK || m == nil || !agrees(html.UnescapeString(m[1]), want, bound) {
			t.Errorf("/failed?%s=%s: %d, count %q, the database has %d", f.param, f.value, code, m, want)
		}
		if ids := eventLink.FindAllStringSubmatch(body, -1); len(ids) != 50 || ids[0][1] != newest(f.where) {
			t.Errorf("/failed?%s=%s: %d events, the first %v, want 50 from the newest %s", f.param, f.value, len(ids), ids[:min(1, len(ids))], newest(f.where))
		}
	}

	// The event list counts what it can from an index alone.
	for _, st := range []string{"FAILED", "SKIPPED"} {
		_, body := get(t, srv, "/events?status="+st, readToken)
		m := regexp.MustCompile(`<p id="count">([^<]*) status rows match`).FindStringSubmatch(body)
		if m == nil || !agrees(html.UnescapeString(m[1]), total(st), 100000) {
			t.Errorf("/events?status=%s: count %v, the database has %d", st, m, total(st))
		}
	}

	// The rare topic's 600, page by page, newest first: every one once, in
	// the database's order; then back one page.
	var want []string
	list, err := pool.Query(ctx, `SELECT event_id::text FROM outbox.deliveries WHERE status = 'FAILED' AND topic = 'rare'
		ORDER BY updated_at DESC, event_id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for list.Next() {
		var id string
		_ = list.Scan(&id)
		want = append(want, id)
	}
	var got []string
	var pages []string
	for path := "/failed?topic=rare"; path != ""; {
		_, body := get(t, srv, path, readToken)
		pages = append(pages, path)
		for _, m := range eventLink.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		path = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
		if len(pages) > 20 {
			t.Fatal("more than 20 pages of 50 for 600 events")
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || len(pages) != 12 {
		t.Errorf("topic rare page by page: %d events in %d pages, want the database's %d in its order in 12", len(got), len(pages), len(want))
	}
	_, last := get(t, srv, pages[len(pages)-1], readToken)
	m := prevLink.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the last page has no previous page")
	}
	_, prev := get(t, srv, html.UnescapeString(m[1]), readToken)
	if ids := eventLink.FindAllStringSubmatch(prev, -1); len(ids) != 50 || ids[0][1] != want[500] {
		t.Errorf("the page before the last: %d events, want 50 from the 501st", len(ids))
	}

	// The confirmation of skipping the rare topic counts its 600 exactly.
	code, body = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "topic": {"rare"}}, "")
	if code != http.StatusOK || !strings.Contains(body, `of topic &#34;rare&#34;`) || !strings.Contains(body, "600 events would change now") {
		t.Errorf("the confirmation of skipping topic rare: %d\n%s", code, body)
	}
	wantAll := total("FAILED")
	code, body = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}}, "")
	if code != http.StatusOK || !strings.Contains(body, thousandsOf(wantAll)+" events would change now") {
		t.Errorf("the confirmation of skipping every FAILED event: %d, want %s\n%s", code, thousandsOf(wantAll), body)
	}
}

func thousandsOf(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// httptestServer serves h for the test.
func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
