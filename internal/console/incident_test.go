package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func TestConsole_BadInputIsA400NamingTheParameter(t *testing.T) {
	t.Parallel()
	srv, _, _ := serve(t, "")
	for _, c := range []struct{ path, name string }{
		{"/failed?reason=%00", "reason"},
		{"/failed?reason=NO_SUCH_REASON", "reason"},
		{"/failed?topic=%ff%fe", "topic"},
		{"/events?topic=%ff%fe", "topic"},
		{"/events?key=a%00b", "key"},
		{"/events?status=failed", "status"},
		{"/events?status=FOO", "status"},
		{"/events?reason=FOO", "reason"},
		{"/events?since=yesterday", "since"},
		{"/failed?order=sideways", "order"},
		{"/failed?after=x", "after"},
	} {
		code, body := get(t, srv, c.path, readToken)
		if code != http.StatusBadRequest || !strings.Contains(body, c.name) || strings.Contains(body, "SQLSTATE") {
			t.Errorf("%s: %d %q, want 400 naming %s", c.path, code, body, c.name)
		}
	}
	code, body := postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "topic": {"a\x00b"}}, "")
	if code != http.StatusBadRequest || !strings.Contains(body, "topic") {
		t.Errorf("a form with a NUL: %d %q, want 400 naming topic", code, body)
	}
	for _, ok := range []string{"/events?status=FAILED", "/failed?reason=INVALID_TOPIC&order=oldest", "/events?topic=%C3%A9"} {
		if code, body := get(t, srv, ok, readToken); code != http.StatusOK {
			t.Errorf("%s: %d, want 200\n%s", ok, code, body)
		}
	}
}

func TestConsole_ARedirectStaysUnderThePathPrefix(t *testing.T) {
	t.Parallel()
	srv, _, _ := serve(t, "/outbox")
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/outbox", nil)
	req.SetBasicAuth("operator", readToken)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "/outbox/" {
		t.Errorf("GET /outbox: %d to %q, want a redirect to /outbox/", resp.StatusCode, loc)
	}
}

func TestConsole_APayloadOver64KiBIsShownCutWithALinkToDownloadItWhole(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	var id string
	if err := pool.QueryRow(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload) VALUES ('big', jsonb_build_object('x', repeat('é', 600000))) RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status) SELECT id, topic, 'FAILED' FROM ev RETURNING event_id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var whole string
	if err := pool.QueryRow(context.Background(), `SELECT payload::text FROM outbox.events WHERE id = $1`, id).Scan(&whole); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv, "/events/"+id+"?payload=show", readToken)
	if code != http.StatusOK || len(body) > 100<<10 || !strings.Contains(body, `id="download"`) || !strings.Contains(body, "1,200,") {
		t.Errorf("the page of a 1.2 MB payload: %d, %d bytes, download link %v", code, len(body), strings.Contains(body, `id="download"`))
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events/"+id+"/payload", nil)
	req.SetBasicAuth("operator", readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != whole || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("the download: %d, %d bytes (want %d), %q", resp.StatusCode, len(b), len(whole), resp.Header.Get("Content-Disposition"))
	}
}

func TestConsole_HeldKeysAreShownOnlyWhenKeysCanBeHeldAndPagedWithTheirCount(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	// 120 keys each held by a FAILED event, with one queued behind it.
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload)
		            SELECT 'orders', 'k' || lpad(((i + 1) / 2)::text, 3, '0'), '{}' FROM generate_series(1, 240) i
		            RETURNING id, topic, key, seq)
		INSERT INTO outbox.deliveries (event_id, topic, key, status, attempts, commit_lsn, tx_position, seq)
		SELECT id, topic, key, CASE WHEN seq = min(seq) OVER (PARTITION BY key) THEN 'FAILED' ELSE 'PENDING' END, 0, '0/0', 0, seq
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	st := store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL)))
	for _, policy := range []string{"continue", "hold"} {
		c, err := console.New(st, console.Config{FailedKeyPolicy: policy})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c.Handler())
		t.Cleanup(srv.Close)
		code, _ := get(t, srv, "/held", "")
		_, overview := get(t, srv, "/", "")
		if policy == "continue" {
			if code != http.StatusNotFound || strings.Contains(overview, "Held keys") {
				t.Errorf("continue: /held %d, overview shows held keys %v; want neither", code, strings.Contains(overview, "Held keys"))
			}
			continue
		}
		if !strings.Contains(overview, "Held keys") {
			t.Errorf("hold: the overview shows no held keys")
		}
		var keys []string
		pages := 0
		for path := "/held"; path != ""; pages++ {
			code, body := get(t, srv, path, "")
			if code != http.StatusOK || !strings.Contains(body, `<p id="count">120 held keys`) {
				t.Fatalf("%s: %d, no count of 120:\n%s", path, code, body)
			}
			for _, m := range regexp.MustCompile(`<td>orders</td><td><a href="[^"]*">(k\d+)</a>`).FindAllStringSubmatch(body, -1) {
				keys = append(keys, m[1])
			}
			path = ""
			if m := nextLink.FindStringSubmatch(body); m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
			if pages > 5 {
				t.Fatal("more than 5 pages of 50 for 120 keys")
			}
		}
		if len(keys) != 120 || pages != 3 || keys[0] != "k001" || keys[119] != "k120" {
			t.Errorf("held keys page by page: %d keys in %d pages (%v...), want 120 in 3", len(keys), pages, keys[:min(3, len(keys))])
		}
		// A held key's page: the event that blocks it, then its queue.
		code, body := get(t, srv, "/keys?topic=orders&key=k001", "")
		queue := regexp.MustCompile(`<td class="n">([a-z0-9]+)</td>\s*<td><a href="/events/[0-9a-f-]+">[0-9a-f-]+</a></td><td>([A-Z]+)</td>`).
			FindAllStringSubmatch(body, -1)
		if code != http.StatusOK || !strings.Contains(body, "The first one holds the others") || len(queue) != 2 ||
			queue[0][1] != "blocking" || queue[0][2] != "FAILED" || queue[1][2] != "PENDING" {
			t.Errorf("the page of held key k001: %d, queue %v\n%s", code, queue, body)
		}
	}
}

func TestConsole_ARelayThatCannotBeReachedIsShownSoNotAsLagZero(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there now
	srv, _, _ := serveConfig(t, console.Config{RelayMetrics: []string{gone.URL + "/metrics"}})
	_, body := get(t, srv, "/", "")
	relays := regexp.MustCompile(`(?s)<table id="relays".*?</table>`).FindString(body)
	if !strings.Contains(relays, "unreachable") || strings.Contains(relays, `<td class="n">0</td>`) || strings.Contains(relays, `<td class="n">0.0</td>`) {
		t.Errorf("an unreachable relay:\n%s", relays)
	}
}

func TestBrowser_AFailedRefreshIsShownWithSinceWhenAndWhyAndTheNumbersMarkedStale(t *testing.T) {
	dbURL, _ := pgtest.Migrated(t)
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL))), console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	h := c.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && r.URL.Path == "/" {
			http.Error(w, "The outbox's database could not answer (error id 0123456789abcdef)", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := browser(t, "")
	var refreshed string
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#totals", chromedp.ByQuery), chromedp.Text("#refreshed", &refreshed))
	if !strings.HasSuffix(refreshed, " UTC") {
		t.Errorf("the time of the last refresh %q is not labelled UTC", refreshed)
	}
	down.Store(true)
	var stale, class string
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	run(t, waitCtx, chromedp.WaitVisible("#stale", chromedp.ByQuery), chromedp.Text("#stale", &stale),
		chromedp.Evaluate(`document.getElementById("totals").className`, &class))
	if !strings.Contains(stale, "Refresh failing since ") || !strings.Contains(stale, " UTC") || !strings.Contains(stale, "503") ||
		!strings.Contains(stale, "error id 0123456789abcdef") || !strings.Contains(class, "stale") {
		t.Errorf("a failing refresh: %q, the totals' class %q", stale, class)
	}
	down.Store(false)
	waitCtx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	run(t, waitCtx, chromedp.WaitNotVisible("#stale", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("totals").className`, &class))
	if strings.Contains(class, "stale") {
		t.Errorf("refreshed again, the totals are still marked stale")
	}
}

func TestConsole_ResendingAnInvalidEventWarnsThatItFailsAgainAndAsks(t *testing.T) {
	t.Parallel()
	srv, ids, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	if _, err := pool.Exec(context.Background(), `UPDATE outbox.deliveries SET failure_reason = 'INVALID_EVENT', max_attempts = 5,
		last_error = 'no ce_type: set --cloudevents-default-type' WHERE event_id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	code, body := postForm(t, srv, "/resend", adminToken, url.Values{"id": {ids[0]}}, "")
	if code != http.StatusOK || !strings.Contains(body, `id="will-fail"`) || !strings.Contains(body, "anyway") {
		t.Errorf("the confirmation of resending an INVALID_EVENT: %d, no warning that it fails again\n%s", code, body)
	}
	code, body = postForm(t, srv, "/resend", adminToken, url.Values{"match": {"yes"}}, "")
	if code != http.StatusOK || !strings.Contains(body, "1 of them failed with INVALID_EVENT") {
		t.Errorf("the confirmation of resending every FAILED event: %d, no warning for the INVALID_EVENT among them\n%s", code, body)
	}
	if _, body := postForm(t, srv, "/resend", adminToken, url.Values{"id": {ids[1]}}, ""); strings.Contains(body, `id="will-fail"`) {
		t.Errorf("a warning for an event that did not fail with INVALID_EVENT:\n%s", body)
	}
	_, body = get(t, srv, "/events/"+ids[0], readToken)
	if m := regexp.MustCompile(`<td id="attempts">([^<]*)</td>`).FindStringSubmatch(body); m == nil || strings.Contains(m[1], "of 5") ||
		!strings.Contains(m[1], "not retried") {
		t.Errorf("the attempts of an INVALID_EVENT: %v, want no \"of 5\" and that it is not retried", m)
	}
}

func TestBrowser_AnActionFromAnEventsPageComesBackToIt(t *testing.T) {
	srv, ids, _ := serve(t, "/outbox")
	ctx := browser(t, adminToken)
	var location, notice, status string
	run(t, ctx, chromedp.Navigate(srv.URL+"/outbox/events/"+ids[0]), chromedp.Click("button.skip", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery), chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible(".notice", chromedp.ByQuery), chromedp.Location(&location), chromedp.Text(".notice", &notice),
		chromedp.Text("#status", &status))
	if u, err := url.Parse(location); err != nil || u.Path != "/outbox/events/"+ids[0] || !strings.Contains(notice, "skip: 1 events") || status != "SKIPPED" {
		t.Errorf("after a skip from the event's page: on %s, notice %q, status %q", location, notice, status)
	}
}

func TestConsole_FailedEventsAreSearchedByTheTimeTheyFailed(t *testing.T) {
	t.Parallel()
	srv, ids, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	if _, err := pool.Exec(context.Background(), `UPDATE outbox.deliveries SET updated_at = now() - interval '2 hours' WHERE event_id = $1`,
		ids[0]); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	code, body := get(t, srv, "/failed?"+url.Values{"since": {since}}.Encode(), readToken)
	if code != http.StatusOK || strings.Contains(body, ids[0]) || !strings.Contains(body, ids[1]) || !strings.Contains(body, `<p id="count">1 FAILED`) {
		t.Errorf("FAILED since an hour ago: %d, lists the one that failed 2 hours ago %v, the other %v\n%s", code,
			strings.Contains(body, ids[0]), strings.Contains(body, ids[1]), body)
	}
	code, body = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "since": {since}}, "")
	if code != http.StatusOK || !strings.Contains(body, "that failed at or after") || !strings.Contains(body, "1 event would change now") {
		t.Errorf("the confirmation of skipping those: %d\n%s", code, body)
	}
	code, _ = postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "since": {since}, "confirm": {"yes"}}, "")
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SKIPPED'`); code != http.StatusSeeOther || n != 1 {
		t.Errorf("skip those: %d, %d SKIPPED, want 1", code, n)
	}
	if code, body := get(t, srv, "/failed?until=soon", readToken); code != http.StatusBadRequest || !strings.Contains(body, "until") {
		t.Errorf("until=soon: %d %q, want 400 naming until", code, body)
	}
}

func TestConsole_TheEventListIsWalkedBothWaysInEitherOrder(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload) SELECT 'walk', '{}' FROM generate_series(1, 120) RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status) SELECT id, topic, 'SENT' FROM ev`); err != nil {
		t.Fatal(err)
	}
	var newest []string
	rows, err := pool.Query(context.Background(), `SELECT event_id::text FROM outbox.deliveries ORDER BY event_id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		newest = append(newest, id)
	}
	page := func(path string) (ids []string, next, prev, flip string) {
		t.Helper()
		code, body := get(t, srv, path, readToken)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, body)
		}
		for _, m := range regexp.MustCompile(`<td><a href="/events/([0-9a-f-]{36})">`).FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		for _, l := range []struct {
			id string
			to *string
		}{{"next", &next}, {"prev", &prev}, {"order", &flip}} {
			if m := regexp.MustCompile(`<a id="` + l.id + `" href="([^"]*)">`).FindStringSubmatch(body); m != nil {
				*l.to = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		return ids, next, prev, flip
	}
	join := func(s []string) string { return strings.Join(s, " ") }
	ids, next, prev, flip := page("/events")
	if join(ids) != join(newest[:50]) || prev != "" || next == "" {
		t.Fatalf("first page, newest first: %d events, prev %q next %q", len(ids), prev, next)
	}
	ids2, _, prev2, _ := page(next)
	if join(ids2) != join(newest[50:100]) || prev2 == "" {
		t.Fatalf("second page: %d events, prev %q", len(ids2), prev2)
	}
	if back, _, _, _ := page(prev2); join(back) != join(ids) {
		t.Errorf("previous from the second page: not the first page")
	}
	oldest := slices.Clone(newest)
	slices.Reverse(oldest)
	ids, next, _, _ = page(flip)
	if join(ids) != join(oldest[:50]) || next == "" || !strings.Contains(next, "order=oldest") {
		t.Errorf("oldest first: %d events (first %v), next %q", len(ids), ids[:min(1, len(ids))], next)
	}
	if ids2, _, prev2, _ := page(next); join(ids2) != join(oldest[50:100]) || prev2 == "" {
		t.Errorf("oldest first, second page: %d events", len(ids2))
	} else if back, _, _, _ := page(prev2); join(back) != join(ids) {
		t.Errorf("oldest first, previous from the second page: not the first page")
	}
}

func TestConsole_TopicsShowTheirCountsNewestFailureAndOldestPending(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload) VALUES ('orders', '{}') RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status, created_at)
		SELECT id, topic, 'PENDING', '2026-11-26 10:00:00+00' FROM ev`); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv, "/topics", readToken)
	row := regexp.MustCompile(`(?s)<tr><td>outbox.events</td><td><a href="/events\?topic=orders">orders</a></td>.*?</tr>`).FindString(body)
	for _, want := range []string{`<a href="/failed?topic=orders">2</a>`, `<a href="/events?status=PENDING&amp;topic=orders">1</a>`,
		"2026-11-26 10:00:00.000 UTC", "<td>INVALID_TOPIC</td>", "broker said no"} {
		if code != http.StatusOK || !strings.Contains(row, want) {
			t.Errorf("/topics: %d, the row of orders lacks %s:\n%s", code, want, row)
		}
	}
}
