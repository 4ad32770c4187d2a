package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// The tokens: 16 characters at least.
const (
	readToken  = "read-7f3a-0b9c-41d2"
	adminToken = "admin-5c1e-8d0f-a7b3"
)

// serve starts a console over a migrated database with two FAILED events
// (one whose error holds a script) and one SENT, as outbox_operator.
func serve(t *testing.T, prefix string) (srv *httptest.Server, ids []string, dbURL string) {
	t.Helper()
	return serveConfig(t, console.Config{ReadToken: readToken, AdminToken: adminToken, Prefix: prefix, FailedKeyPolicy: "hold"})
}

// serveConfig is serve with the console configured by cfg.
func serveConfig(t *testing.T, cfg console.Config) (srv *httptest.Server, ids []string, dbURL string) {
	t.Helper()
	dbURL, pool := pgtest.Migrated(t)
	rows, err := pool.Query(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload) VALUES
			('orders', 'k1', '{}'), ('orders', 'k2', '{}'), ('payments', 'k3', '{}') RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status, attempts, failure_reason, last_error)
		SELECT id, topic, CASE WHEN topic = 'payments' THEN 'SENT' ELSE 'FAILED' END, 1,
		       CASE WHEN topic = 'orders' THEN 'INVALID_TOPIC' END, '<script>alert(1)</script> broker said no'
		FROM ev RETURNING event_id::text`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL))), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv, ids, dbURL
}

// get fetches path with token (none: ""), and returns the status and body.
func get(t *testing.T, srv *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.SetBasicAuth("operator", token)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post sends a confirmed action on event id (confirm: "yes", or "" to be
// asked), from origin ("": the console's own page).
func post(t *testing.T, srv *httptest.Server, path, token, id, origin string) (int, string) {
	t.Helper()
	return postForm(t, srv, path, token, url.Values{"id": {id}, "confirm": {"yes"}}, origin)
}

func postForm(t *testing.T, srv *httptest.Server, path, token string, form url.Values, origin string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("operator", token)
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	return do(t, req)
}

func TestConsole_TokensDecideWhatAPageShowsAndAllows(t *testing.T) {
	t.Parallel()
	srv, ids, _ := serve(t, "")
	if code, _ := get(t, srv, "/", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get(t, srv, "/", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}
	code, body := get(t, srv, "/failed", readToken)
	if code != http.StatusOK || strings.Contains(body, "<form method=\"post\"") || !strings.Contains(body, ids[0]) {
		t.Errorf("read-only: %d, actions shown %v", code, strings.Contains(body, "<form method=\"post\""))
	}
	if code, _ := post(t, srv, "/resend", readToken, ids[0], ""); code != http.StatusForbidden {
		t.Errorf("a resend with the read-only token: %d, want 403", code)
	}
	if code, body := get(t, srv, "/failed", adminToken); code != http.StatusOK || strings.Count(body, `class="resend"`) != 2 {
		t.Errorf("admin: %d, %d resend buttons, want 2", code, strings.Count(body, `class="resend"`))
	}
}

func TestConsole_ShowsTheDatabasesCountsAndErrorTextAsText(t *testing.T) {
	t.Parallel()
	srv, _, _ := serve(t, "")
	code, body := get(t, srv, "/", readToken)
	// The counts table: PENDING, PROCESSING, FAILED, SENT, SKIPPED.
	for _, want := range []string{`>orders</a></td><td class="n"></td><td class="n"></td><td class="n"><a href="/failed?topic=orders">2</a></td><td class="n"></td>`,
		`>payments</a></td><td class="n"></td><td class="n"></td><td class="n"></td><td class="n"><a href="/events?status=SENT&amp;topic=payments">1</a></td>`,
		"INVALID_TOPIC</a></td><td class=\"n\">2</td>"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("overview lacks %s:\n%s", want, body)
		}
	}
	if !strings.Contains(body, `id="total-FAILED"><a href="/failed">2</a></td>`) || !strings.Contains(body, `id="pause"`) {
		t.Errorf("overview: no FAILED total of 2 or no pause button:\n%s", body)
	}
	if code, js := get(t, srv, "/static/console.js", readToken); code != http.StatusOK || !strings.Contains(js, "data-refresh") {
		t.Errorf("the refresh script: %d", code)
	}
	_, body = get(t, srv, "/failed", readToken)
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt; broker said no") {
		t.Errorf("the error text is not shown as text:\n%s", body)
	}
}

// Every count and topic name the overview shows is a link to the rows it
// counts: following each lists exactly that many events.
func TestConsole_EveryCountAndTopicOnTheOverviewLeadsToItsEvents(t *testing.T) {
	t.Parallel()
	srv, _, _ := serve(t, "")
	_, body := get(t, srv, "/", readToken)
	tables := regexp.MustCompile(`(?s)<table id="(totals|counts)".*?</table>`).FindAllString(body, -1)
	if len(tables) != 2 {
		t.Fatalf("overview: %d of the totals and counts tables", len(tables))
	}
	listed := func(path string) int {
		code, page := get(t, srv, html.UnescapeString(path), readToken)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		return len(regexp.MustCompile(`<td><a href="/events/[0-9a-f-]{36}">`).FindAllString(page, -1))
	}
	links := 0
	for _, table := range tables {
		for _, m := range regexp.MustCompile(`<td class="n"[^>]*>(?:<a href="([^"]*)">)?([^<]*)`).FindAllStringSubmatch(table, -1) {
			if m[2] == "" {
				continue // a blank cell: no rows
			}
			n, err := strconv.Atoi(m[2])
			if m[1] == "" || err != nil {
				t.Errorf("a count of %q is not a link", m[2])
				continue
			}
			links++
			if got := listed(m[1]); got != n {
				t.Errorf("the count %d links to %s, which lists %d events", n, m[1], got)
			}
		}
	}
	for topic, n := range map[string]int{"orders": 2, "payments": 1} {
		path := "/events?topic=" + topic
		if !strings.Contains(body, `<a href="`+path+`">`+topic+`</a>`) {
			t.Errorf("topic %s: not a link to its events", topic)
		} else if got := listed(path); got != n {
			t.Errorf("topic %s lists %d events, want %d", topic, got, n)
		}
	}
	if links != 7 { // the five totals (three of them 0), orders' FAILED 2, payments' SENT 1
		t.Errorf("%d counts linked, want 7", links)
	}
}

func TestConsole_ResendAndSkipChangeOnlyRowsStillFailed(t *testing.T) {
	t.Parallel()
	srv, ids, dbURL := serve(t, "/outbox")
	pool := pgtest.Pool(t, dbURL)
	status := func(id string) string {
		var s string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if code, _ := get(t, srv, "/outbox/", adminToken); code != http.StatusOK {
		t.Fatalf("under the path prefix: %d", code)
	}
	code, _ := post(t, srv, "/outbox/resend", adminToken, ids[0], "")
	if code != http.StatusSeeOther || status(ids[0]) != "PENDING" {
		t.Fatalf("resend: %d, status %s", code, status(ids[0]))
	}
	// The page still shows it FAILED; the row is not any more: nothing changes.
	if _, err := pool.Exec(context.Background(), `UPDATE outbox.deliveries SET status = 'SENT' WHERE event_id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	code, _ = post(t, srv, "/outbox/resend", adminToken, ids[0], "")
	if code != http.StatusSeeOther || status(ids[0]) != "SENT" {
		t.Errorf("a stale resend: %d, status %s, want SENT kept", code, status(ids[0]))
	}
	if code, _ = post(t, srv, "/outbox/skip", adminToken, ids[1], ""); code != http.StatusSeeOther || status(ids[1]) != "SKIPPED" {
		t.Errorf("skip: %d, status %s", code, status(ids[1]))
	}
	// A cross-origin POST is refused, whatever its token.
	if code, _ = post(t, srv, "/outbox/resend", adminToken, ids[1], "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("a cross-origin POST: %d, want 403", code)
	}
}

func TestConsole_RefusesANonLoopbackAddressWithoutATokenAndABadPrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{Listen: "0.0.0.0:8080"}, "not a loopback address"},
		{console.Config{Listen: "127.0.0.1:8080", Prefix: "outbox/"}, "--path-prefix"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	for _, ok := range []console.Config{{}, {Listen: "[::1]:9000"}, {Listen: "0.0.0.0:8080", AdminToken: adminToken}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func TestConsole_EveryActionIsConfirmedWithHowManyRowsItChanges(t *testing.T) {
	t.Parallel()
	srv, ids, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	failed := func() int {
		return pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'`)
	}
	// Asked first: nothing changes yet.
	code, body := postForm(t, srv, "/resend", adminToken, url.Values{"sel": ids[:2]}, "")
	if code != http.StatusOK || !strings.Contains(body, "This will resend the 2 selected events that are still FAILED.") ||
		!strings.Contains(body, "2 events would change now") || failed() != 2 {
		t.Fatalf("the confirmation of 2 selected: %d, FAILED %d\n%s", code, failed(), body)
	}
	code, body = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "reason": {"INVALID_TOPIC"}}, "")
	if code != http.StatusOK || !strings.Contains(body, "This will skip every FAILED event that failed with reason INVALID_TOPIC.") ||
		!strings.Contains(body, "2 events would change now") || failed() != 2 {
		t.Fatalf("the confirmation of all matching: %d, FAILED %d\n%s", code, failed(), body)
	}
	// Confirmed: every matching row, through outbox.skip_failed.
	code, _ = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "reason": {"INVALID_TOPIC"}, "confirm": {"yes"}}, "")
	if code != http.StatusSeeOther || failed() != 0 {
		t.Fatalf("skip all matching: %d, FAILED %d", code, failed())
	}
	// The page of selected events, now stale: nothing changes, and it says so.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/resend", strings.NewReader(url.Values{"sel": ids[:2], "confirm": {"yes"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("operator", adminToken)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "left=2") ||
		pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SKIPPED'`) != 2 {
		t.Errorf("a stale resend of 2: redirected to %q", loc)
	}
}

func TestConsole_ListsEventsByFilterAndShowsOneWithItsPayloadOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	srv, ids, _ := serve(t, "")
	code, body := get(t, srv, "/events?status=SENT", readToken)
	if code != http.StatusOK || !strings.Contains(body, ids[2]) || strings.Contains(body, ids[0]) {
		t.Errorf("SENT events: %d\n%s", code, body)
	}
	if code, body = get(t, srv, "/events?lookup=k2", readToken); code != http.StatusOK || !strings.Contains(body, ids[1]) ||
		strings.Contains(body, ids[0]) {
		t.Errorf("a key looked up: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events?lookup="+ids[0], nil)
	req.SetBasicAuth("operator", readToken)
	if code, _ = do(t, req); code != http.StatusSeeOther {
		t.Errorf("an event id looked up: %d, want a redirect to its page", code)
	}
	code, body = get(t, srv, "/events/"+ids[0], readToken)
	if code != http.StatusOK || !strings.Contains(body, `id="show-payload"`) || strings.Contains(body, `id="payload"`) ||
		!strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("an event's page: %d\n%s", code, body)
	}
	if _, body = get(t, srv, "/events/"+ids[0]+"?payload=show", readToken); !strings.Contains(body, `<pre id="payload" class="err">{}</pre>`) {
		t.Errorf("the payload asked for:\n%s", body)
	}
	if code, _ = get(t, srv, "/events/00000000-0000-0000-0000-000000000000", readToken); code != http.StatusNotFound {
		t.Errorf("an unknown event: %d", code)
	}
}

func TestConsole_AFilterFewRowsMatchSaysHowFarItSearchedAndSearchesOn(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	ids := []string{"01a20000-0000-7000-8000-000000000001", "01a20000-0000-7000-8000-000000000002",
		"01a20000-0000-7000-8000-000000000003"} // oldest first; the newest is not of topic orders
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (id, topic, key, payload) VALUES
			($1, 'orders', 'k1', '{}'), ($2, 'orders', 'k2', '{}'), ($3, 'payments', 'k3', '{}') RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`, ids[0], ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	// A walk of one row a page: the newest row (payments) does not match.
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL))), console.Config{Walk: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	code, body := get(t, srv, "/events?topic=orders", "")
	link := regexp.MustCompile(`<a id="next" href="([^"]+)">search older events</a>`).FindStringSubmatch(body)
	if code != http.StatusOK || !strings.Contains(body, `id="walked"`) || link == nil || strings.Contains(body, ids[1]) {
		t.Fatalf("first page: %d, want no row, the walk said and a link to search on:\n%s", code, body)
	}
	_, body = get(t, srv, html.UnescapeString(link[1]), "")
	if !strings.Contains(body, ids[1]) || strings.Contains(body, ids[0]) || !strings.Contains(body, "search older events") {
		t.Errorf("searching on: want the second orders event alone, and a link to search on:\n%s", body)
	}
}
