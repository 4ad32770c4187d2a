package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// browser starts headless Chromium (Debian's package, which
// scripts/test.sh installs) sending the token, if any, with every request.
func browser(t *testing.T, token string) context.Context {
	t.Helper()
	bin := os.Getenv("OUTBOX_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("the console's browser tests need Chromium at %s (scripts/test.sh installs Debian's chromium): %v", bin, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true)) // chromedp makes and removes its profile
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	headers := network.Headers{}
	if token != "" {
		headers["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+token))
	}
	if err := chromedp.Run(ctx, network.Enable(), network.SetExtraHTTPHeaders(headers)); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	// A script the page runs would open a dialog: fail on any.
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			t.Errorf("a dialog opened: %q (a script from the data ran)", d.Message)
		}
	})
	return ctx
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func TestBrowser_WithoutATokenThePageIsRefused(t *testing.T) {
	srv, _, _ := serve(t, "")
	ctx := browser(t, "")
	statuses := make(chan int64, 1)
	chromedp.ListenTarget(ctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Type == network.ResourceTypeDocument {
			select {
			case statuses <- r.Response.Status:
			default:
			}
		}
	})
	// Headless Chromium ends a navigation answered 401 with a basic-auth
	// challenge as ERR_INVALID_AUTH_CREDENTIALS: the answer is what counts.
	err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/"))
	select {
	case status := <-statuses:
		if status != http.StatusUnauthorized {
			t.Errorf("no token: %d (%v), want 401", status, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no response to the page's request: %v", err)
	}
}

func TestBrowser_TheReadOnlyTokenSeesTheDatabasesCountsAndNoAction(t *testing.T) {
	srv, _, dbURL := serve(t, "")
	ctx := browser(t, readToken)
	var counts, failed, lastError string
	var buttons int
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.Text("#counts", &counts),
		chromedp.Navigate(srv.URL+"/failed"), chromedp.Text("#failed", &failed),
		chromedp.Evaluate(`document.querySelectorAll("button.resend, button.skip, #resend-matching").length`, &buttons),
		chromedp.Text("#failed td.err", &lastError))
	pool := pgtest.Pool(t, dbURL)
	for _, topic := range []string{"orders", "payments"} {
		// A row of the table: its table, topic and a cell per status,
		// blank for none; the same from the database.
		cells := []string{"outbox.events", topic}
		for _, status := range store.Statuses() {
			cell := ""
			if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
				WHERE e.topic = $1 AND d.status = $2`, topic, status); n > 0 {
				cell = strconv.Itoa(n)
			}
			cells = append(cells, cell)
		}
		want := strings.TrimRight(strings.Join(cells, "\t"), "\t")
		var rows []string
		for _, line := range strings.Split(counts, "\n") {
			rows = append(rows, strings.TrimRight(line, "\t "))
		}
		if !slices.Contains(rows, want) {
			t.Errorf("the overview's counts %q lack the row %q (the database's)", counts, want)
		}
	}
	if buttons != 0 {
		t.Errorf("%d action buttons for the read-only token", buttons)
	}
	if lastError != "<script>alert(1)</script> broker said no" {
		t.Errorf("the error is not shown as its text: %q", lastError)
	}
}

func TestBrowser_ResendAndSkipAreConfirmedAndChangeThePageAndTheDatabase(t *testing.T) {
	srv, ids, dbURL := serve(t, "/outbox") // behind a reverse proxy's path prefix
	pool := pgtest.Pool(t, dbURL)
	ctx := browser(t, adminToken)
	status := func(id string) string {
		var s string
		_ = pool.QueryRow(context.Background(), `SELECT status FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&s)
		return s
	}
	var confirm, notice, failed string
	// Skip one: the confirmation says how many, then the row changes.
	run(t, ctx, chromedp.Navigate(srv.URL+"/outbox/failed"),
		chromedp.Click(fmt.Sprintf(`button.skip[value="%s"]`, ids[0]), chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery), chromedp.Text("#confirm-count", &confirm),
		chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible(".notice", chromedp.ByQuery),
		chromedp.Text(".notice", &notice), chromedp.Text("#failed", &failed))
	if !strings.Contains(confirm, "1 event would change now") || !strings.Contains(notice, "skip: 1 events") ||
		strings.Contains(failed, ids[0]) || status(ids[0]) != "SKIPPED" {
		t.Errorf("skip: confirmation %q, notice %q, still listed %v, status %s", confirm, notice, strings.Contains(failed, ids[0]), status(ids[0]))
	}
	// Resend all that match the filter: asked, cancelled (back on the
	// filtered list), asked again, confirmed (back on the filtered list).
	var what, filter, location string
	run(t, ctx, chromedp.Navigate(srv.URL+"/outbox/failed?reason=INVALID_TOPIC"),
		chromedp.Click("#resend-matching", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#cancel", chromedp.ByQuery), chromedp.WaitVisible("#resend-matching", chromedp.ByQuery),
		chromedp.Value(`input[name="reason"]`, &filter, chromedp.ByQuery))
	if filter != "INVALID_TOPIC" || status(ids[1]) != "FAILED" {
		t.Errorf("cancel: the filter is %q, want INVALID_TOPIC kept; status %s", filter, status(ids[1]))
	}
	run(t, ctx, chromedp.Click("#resend-matching", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Text("#confirm-what", &what), chromedp.Text("#confirm-count", &confirm), chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible(".notice", chromedp.ByQuery), chromedp.Text(".notice", &notice), chromedp.Location(&location))
	if !strings.Contains(what, "every FAILED event that failed with reason INVALID_TOPIC") || !strings.Contains(confirm, "1 event would change now") ||
		!strings.Contains(location, "reason=INVALID_TOPIC") || status(ids[1]) != "PENDING" {
		t.Errorf("resend all matching: confirmation %q %q, notice %q, back on %s, status %s", what, confirm, notice, location, status(ids[1]))
	}
}

func TestBrowser_TheConsolesOwnScriptAndStyleSheetWorkUnderItsContentSecurityPolicy(t *testing.T) {
	srv, _, _ := serve(t, "/outbox")
	ctx := browser(t, readToken)
	violations := make(chan string, 10)
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*cdplog.EventEntryAdded); ok && strings.Contains(e.Entry.Text, "Content Security Policy") {
			select {
			case violations <- e.Entry.Text:
			default:
			}
		}
	})
	var background, pause string
	run(t, ctx, cdplog.Enable(), chromedp.Navigate(srv.URL+"/outbox/"),
		chromedp.Evaluate(`getComputedStyle(document.querySelector("nav")).backgroundColor`, &background),
		// The refresh script fetches the page again every 5 s.
		chromedp.Poll(`document.getElementById("refreshed").textContent !== "now"`, nil, chromedp.WithPollingTimeout(15*time.Second)),
		chromedp.Click("#pause", chromedp.ByQuery), chromedp.Text("#pause", &pause))
	if background != "rgb(27, 31, 36)" {
		t.Errorf("the style sheet is not applied: the navigation's background is %q", background)
	}
	if pause != "resume" {
		t.Errorf("the pause button says %q once pressed, want resume (the script does not run)", pause)
	}
	select {
	case v := <-violations:
		t.Errorf("the console's page broke its own policy: %s", v)
	default:
	}
}

func TestBrowser_ACrossOriginPostIsRefused(t *testing.T) {
	srv, ids, dbURL := serve(t, "")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/skip"><input name="id" value="%s"><input name="confirm" value="yes"></form>
			<script>document.getElementById("f").submit()</script>`, srv.URL, ids[0])
	}))
	t.Cleanup(evil.Close)
	ctx := browser(t, adminToken)
	var body string
	run(t, ctx, chromedp.Navigate(evil.URL), chromedp.WaitReady("body", chromedp.ByQuery),
		chromedp.Poll(`document.location.href.startsWith(`+"`"+srv.URL+"`"+`)`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text("body", &body))
	var st string
	_ = pgtest.Pool(t, dbURL).QueryRow(context.Background(), `SELECT status FROM outbox.deliveries WHERE event_id = $1`, ids[0]).Scan(&st)
	if st != "FAILED" || !strings.Contains(strings.ToLower(body), "cross-origin") {
		t.Errorf("a cross-origin POST: status %s, page %q", st, body)
	}
}

// The screenshots of docs/operating.md: the overview and a FAILED event, from the
// demo's events, and the History of a day of such traffic (per-minute counts as
// the relays write them: a daily wave, a burst of INVALID_TOPIC on invoices). With OUTBOX_SCREENSHOTS=DIR they are written there
// (docs/); without, the test only checks that they are taken.
func TestBrowser_ScreenshotsOfTheOverviewAndAFailedEvent(t *testing.T) {
	dbURL, pool := pgtest.Migrated(t)
	var failed string
	if err := pool.QueryRow(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload, headers, event_type) VALUES
			('orders', 'alice', '{"order_id": 1001, "total": 42.50}', '{"trace-id": "demo-1"}', 'order.created'),
			('orders', 'bob', '{"order_id": 1002, "total": 9.99}', NULL, 'order.created'),
			('payments', 'bob', '{"order_id": 1002, "amount": 9.99}', NULL, 'payment.requested'),
			('orders', 'carol', '{"order_id": 1003}', '{"retries": 3}', NULL),
			('orders', 'alice', '{"order_id": 1001, "status": "shipped"}', NULL, 'order.shipped'),
			('invoices', 'alice', '{"order_id": 1001, "invoice": 1}', NULL, 'invoice.issued') RETURNING id, key, topic, headers),
		d AS (INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, kafka_partition, kafka_offset)
			SELECT id, CASE WHEN key = 'carol' OR topic = 'invoices' THEN 'FAILED' ELSE 'SENT' END,
			       CASE WHEN key = 'carol' THEN 0 ELSE 1 END,
			       CASE WHEN key = 'carol' THEN 'INVALID_EVENT' WHEN topic = 'invoices' THEN 'INVALID_TOPIC' END,
			       CASE WHEN key = 'carol' THEN 'headers: value of "retries" is a number, want a string'
			            WHEN topic = 'invoices' THEN 'topic "invoices": kafka server: Request was for a topic or partition that does not exist on this broker' END,
			       CASE WHEN key <> 'carol' AND topic <> 'invoices' THEN 0 END, CASE WHEN key <> 'carol' AND topic <> 'invoices' THEN 0 END
			FROM ev RETURNING event_id, failure_reason)
		SELECT event_id::text FROM d WHERE failure_reason = 'INVALID_TOPIC'`).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	addMinutes(t, dbURL, func(now time.Time) []store.MinuteCount {
		var counts []store.MinuteCount
		for m := range 25 * 60 {
			for _, x := range []struct {
				topic string
				base  float64
			}{{"orders", 40}, {"payments", 15}, {"invoices", 6}} {
				c := store.MinuteCount{Minute: now.Add(-time.Duration(m) * time.Minute), Topic: x.topic,
					Delivered: int64(x.base*(1.5+math.Sin(2*math.Pi*float64(m)/1440))) + int64(m*7919%11)}
				switch {
				case x.topic == "invoices" && m >= 300 && m <= 345:
					c.Failed = int64(2 + m%5)
				case x.topic == "orders" && m%181 == 0:
					c.Failed = 1
				}
				counts = append(counts, c)
			}
		}
		return counts
	})
	// Its attempts, as the relay kept them: the topic was missing, and was
	// still when it was resent twice.
	if _, err := pool.Exec(context.Background(), `INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
		SELECT $1, 1, now() - s * interval '3 minutes', 'INVALID_TOPIC',
		       'topic "invoices": kafka server: Request was for a topic or partition that does not exist on this broker'
		FROM generate_series(2, 0, -1) s`, failed); err != nil {
		t.Fatal(err)
	}
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.OperatorURL(dbURL))), console.Config{AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	ctx := browser(t, adminToken)
	var overview, event, history []byte
	run(t, ctx, chromedp.EmulateViewport(1200, 800), chromedp.Navigate(srv.URL+"/"), chromedp.FullScreenshot(&overview, 100),
		chromedp.Navigate(srv.URL+"/events/"+failed+"?payload=show"), chromedp.FullScreenshot(&event, 100),
		chromedp.Navigate(srv.URL+"/history"), chromedp.WaitVisible(`svg.chart`), chromedp.FullScreenshot(&history, 100))
	if len(overview) < 1000 || len(event) < 1000 || len(history) < 1000 {
		t.Fatalf("screenshots of %d, %d and %d bytes", len(overview), len(event), len(history))
	}
	if dir := os.Getenv("OUTBOX_SCREENSHOTS"); dir != "" {
		for name, b := range map[string][]byte{"console-overview.png": overview, "console-failed-event.png": event,
			"console-history.png": history} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestBrowser_AnEventsPageListsItsFailedAttemptsNewestFirstInUTCWithTheirErrorsShownAsText(t *testing.T) {
	srv, ids, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	// Two attempts as the relay writes them, with errors a hostile broker
	// or event could make: markup, a terminal escape, a bidirectional
	// override.
	if _, err := pool.Exec(context.Background(), `INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error) VALUES
		($1, 1, '2026-11-26T10:00:00+02', NULL, E'<img src=x onerror=alert(2)> refused\x1b[31m'),
		($1, 2, '2026-11-26T10:00:05+02', 'INVALID_TOPIC', E'gone \u202Eevil')`, ids[0]); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, readToken)
	var rows []string
	var none string
	run(t, ctx, chromedp.Navigate(srv.URL+"/events/"+ids[0]),
		chromedp.Evaluate(`[...document.querySelectorAll("#failed-attempts tr")].slice(1).map(r => r.innerText)`, &rows),
		chromedp.Navigate(srv.URL+"/events/"+ids[2]), chromedp.Text("#failed-attempts", &none))
	want := []string{
		"2\t2026-11-26 08:00:05.000 UTC\tINVALID_TOPIC\tgone \\u202eevil",
		"1\t2026-11-26 08:00:00.000 UTC\tretried\t<img src=x onerror=alert(2)> refused\\x1b[31m",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("the attempts shown:\n%q\nwant:\n%q", rows, want)
	}
	if !strings.Contains(none, "none") {
		t.Errorf("an event without failed attempts shows %q, want none", none)
	}
}

func TestBrowser_FailedIsSearchedByKeyAndErrorTextAndEveryKeyLeadsToItsQueueAndEvents(t *testing.T) {
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	// Key "alice" of orders is held: its first event FAILED, two queued
	// behind it; one of bob's failed with another error.
	var blocking string
	if err := pool.QueryRow(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload) VALUES
			('orders', 'alice', '{"n": 1}'), ('orders', 'alice', '{"n": 2}'), ('orders', 'alice', '{"n": 3}'), ('orders', 'bob', '{"n": 4}')
			RETURNING id, key, seq, (payload->>'n')::int AS n),
		d AS (INSERT INTO outbox.deliveries (event_id, topic, key, seq, status, attempts, failure_reason, last_error, updated_at)
			SELECT id, 'orders', key, seq, CASE WHEN n IN (1, 4) THEN 'FAILED' ELSE 'PENDING' END, CASE WHEN n IN (1, 4) THEN 1 ELSE 0 END,
			       CASE WHEN n IN (1, 4) THEN 'MESSAGE_TOO_LARGE' END,
			       CASE n WHEN 1 THEN 'record too large for alice' WHEN 4 THEN 'record too large, bob' END, now()
			FROM ev RETURNING event_id)
		SELECT ev.id::text FROM ev JOIN d ON d.event_id = ev.id WHERE ev.n = 1`).Scan(&blocking); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, adminToken)
	var rows []string
	var state, location, queue, events string
	run(t, ctx, chromedp.Navigate(srv.URL+"/failed"),
		chromedp.SetValue(`input[name="key"]`, "alice", chromedp.ByQuery),
		chromedp.SetValue(`input[name="error_contains"]`, "too large", chromedp.ByQuery),
		chromedp.Submit(`input[name="key"]`, chromedp.ByQuery), chromedp.WaitVisible("#failed", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#failed tr")].slice(1).map(r => r.querySelector("a[href*='/events/']").innerText + " " + r.querySelector("a.key").innerText)`, &rows),
		chromedp.Location(&location))
	if want := []string{blocking + " alice"}; !slices.Equal(rows, want) || !strings.Contains(location, "key=alice") {
		t.Fatalf("searched FAILED by key alice and %q: %q on %s, want %q", "too large", rows, location, want)
	}
	// The key leads to its queue: the event that blocks it first.
	run(t, ctx, chromedp.Click("#failed a.key", chromedp.ByQuery), chromedp.WaitVisible("#queue", chromedp.ByQuery),
		chromedp.Text("#key-state", &state), chromedp.Text("#queue", &queue))
	if !strings.Contains(state, "key alice: 3 unfinished events") || !strings.Contains(state, "holds the others") ||
		!strings.HasPrefix(strings.TrimSpace(strings.Split(queue, "\n")[1]), "blocking\t"+blocking) {
		t.Errorf("the key's page: %q\n%s", state, queue)
	}
	// And to all its events, with their statuses.
	run(t, ctx, chromedp.Click("#all-events", chromedp.ByQuery), chromedp.WaitVisible("#events", chromedp.ByQuery),
		chromedp.Text("#events", &events))
	if strings.Count(events, "alice") != 3 || strings.Count(events, "PENDING") != 2 || strings.Count(events, "FAILED") != 1 || strings.Contains(events, "bob") {
		t.Errorf("all events of key alice:\n%s", events)
	}
	// Every key shown links to its page: the event list's, an event's.
	for _, page := range []struct{ path, link string }{{"/events?key=bob", "#events a.key"}, {"/events/" + blocking, "#key"}} {
		var linked bool
		run(t, ctx, chromedp.Navigate(srv.URL+page.path), chromedp.Evaluate(`document.querySelector("`+page.link+`") !== null`, &linked))
		if !linked {
			t.Errorf("the key on %s is not a link (%s)", page.path, page.link)
			continue
		}
		run(t, ctx, chromedp.Click(page.link, chromedp.ByQuery), chromedp.WaitVisible("#key-state", chromedp.ByQuery), chromedp.Location(&location))
		if !strings.Contains(location, "/keys?") || !strings.Contains(location, "topic=orders") {
			t.Errorf("the key on %s leads to %s, want its key's page", page.path, location)
		}
	}
	// Skipping all that the search matches names the search and changes
	// only its row.
	var what, confirm string
	run(t, ctx, chromedp.Navigate(srv.URL+"/failed?"+url.Values{"key": {"alice"}, "error_contains": {"too large"}}.Encode()),
		chromedp.Click("#skip-matching", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Text("#confirm-what", &what), chromedp.Text("#confirm-count", &confirm),
		chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible(".notice", chromedp.ByQuery))
	if !strings.Contains(what, `of key "alice"`) || !strings.Contains(what, `whose last error contains "too large"`) ||
		!strings.Contains(confirm, "1 event would change now") {
		t.Errorf("the confirmation of skipping the search: %q %q", what, confirm)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SKIPPED'`); n != 1 ||
		pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SKIPPED' AND event_id = $1`, blocking) != 1 {
		t.Errorf("%d SKIPPED, want only the one the search found", n)
	}
}
