package console_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// hostileTopic is a topic name a writer could choose to attack the page.
const hostileTopic = `<script>alert("t")</script>'"`

// seedMinutes writes per-minute counts as relays do, relative to the
// database's clock: two topics, a hostile name, (other), and a minute
// older than the 24 hours shown.
func seedMinutes(t *testing.T, dbURL string) {
	t.Helper()
	addMinutes(t, dbURL, func(now time.Time) []store.MinuteCount {
		var counts []store.MinuteCount
		for _, x := range []struct {
			ago               time.Duration
			topic             string
			delivered, failed int64
		}{{2, "orders", 1200, 3}, {90, "orders", 50, 0}, {10, "payments", 7, 2}, {5, hostileTopic, 1, 1},
			{3, "(other)", 4, 0}, {25 * 60, "orders", 999, 99}} {
			counts = append(counts, store.MinuteCount{Minute: now.Add(-x.ago * time.Minute), Topic: x.topic,
				Delivered: x.delivered, Failed: x.failed})
		}
		return counts
	})
}

// addMinutes adds the counts made from the database's clock as a relay
// does (store.AddDeliveryMinutes: the minutes, their totals, the hours).
func addMinutes(t *testing.T, dbURL string, make func(now time.Time) []store.MinuteCount) {
	t.Helper()
	pool := pgtest.Pool(t, dbURL)
	var now time.Time
	if err := pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if err := store.New(pool).AddDeliveryMinutes(context.Background(), make(now)); err != nil {
		t.Fatal(err)
	}
}

// cellOf returns the text of the element with id on page.
func cellOf(page, id string) string {
	m := regexp.MustCompile(`(?s)id="` + id + `">(.*?)</td>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], ""))
}

// The History page shows the relays' per-minute counts of the last 24
// hours: the totals the table holds, a chart of each series, each topic
// linked to its own history, events and FAILED list, hostile names as text.
func TestConsole_HistoryShowsTheLast24HoursOfPerMinuteCountsInTotalAndPerTopic(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	seedMinutes(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	window := `topic <> '(all)' AND minute >= date_trunc('hour', now()) - interval '24 hours'`
	delivered := pgtest.Count(t, pool, `SELECT sum(delivered) FROM outbox.delivery_minutes WHERE `+window)
	failed := pgtest.Count(t, pool, `SELECT sum(failed) FROM outbox.delivery_minutes WHERE `+window)

	code, body := get(t, srv, "/history", readToken)
	if code != http.StatusOK {
		t.Fatalf("/history: %d\n%s", code, body)
	}
	if got, want := cellOf(body, "history-delivered"), thousandsOf(int64(delivered)); got != want || want != "1,262" {
		t.Errorf("delivered over the 24 hours: page %q, table %q (want 1,262: the minute of 25 hours ago left out)", got, want)
	}
	if got, want := cellOf(body, "history-failed"), thousandsOf(int64(failed)); got != want || want != "6" {
		t.Errorf("FAILED over 24 hours: page %q, table %q", got, want)
	}
	if n := strings.Count(body, `<svg class="chart"`); n != 2 || !regexp.MustCompile(`<path class="failed" d="M\d+ \d+v-\d+`).MatchString(body) {
		t.Errorf("want two charts, the FAILED one with a line for each minute that has failures; %d charts:\n%s", n, body)
	}
	orders := regexp.MustCompile(`(?s)<tr><td><a href="/history\?topic=orders">orders</a></td>.*?</tr>`).FindString(body)
	for _, want := range []string{`<a href="/events?status=SENT&amp;topic=orders">1,250</a>`, `<a href="/failed?topic=orders">3</a>`,
		`<a href="/events?topic=orders">`} {
		if !strings.Contains(orders, want) {
			t.Errorf("the row of orders lacks %s:\n%s", want, orders)
		}
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, html.EscapeString(`<script>alert(`)) {
		t.Errorf("the hostile topic name is not shown as text:\n%s", body)
	}
	if strings.Contains(body, `/failed?topic=%28other%29`) || !strings.Contains(body, `<a href="/history?topic=%28other%29">(other)</a>`) {
		t.Errorf("(other) is not a topic: it links to its history only")
	}

	code, body = get(t, srv, "/history?topic=orders", readToken)
	if code != http.StatusOK || cellOf(body, "history-delivered") != "1,250" || cellOf(body, "history-failed") != "3" ||
		!strings.Contains(body, `<a href="/failed?topic=orders">3</a>`) {
		t.Errorf("/history?topic=orders: %d, delivered %q and FAILED %q, want 1,250 and 3 linked to its lists\n%s", code,
			cellOf(body, "history-delivered"), cellOf(body, "history-failed"), body)
	}
	hours := regexp.MustCompile(`<td class="n"><a href="([^"]*)">([\d,]+)</a></td><td class="n"><a href="([^"]*)">[\d,]+</a></td></tr>`).
		FindAllStringSubmatch(body, -1)
	var sum int64
	for _, h := range hours {
		n, _ := strconv.ParseInt(strings.ReplaceAll(h[2], ",", ""), 10, 64)
		sum += n
	}
	if len(hours) != 25 || sum != 1250 {
		t.Errorf("/history?topic=orders per hour: %d hours summing to %d delivered, want the 25 hours of the window and 1,250", len(hours), sum)
	}
	if len(hours) > 0 {
		last := hours[len(hours)-1]
		sent, failedList := html.UnescapeString(last[1]), html.UnescapeString(last[3])
		if !regexp.MustCompile(`^/events\?since=[^&]+Z&status=SENT&topic=orders&until=[^&]+Z$`).MatchString(sent) ||
			!regexp.MustCompile(`^/failed\?since=[^&]+Z&topic=orders&until=[^&]+Z$`).MatchString(failedList) {
			t.Errorf("the current hour's counts lead to %s and %s, want its SENT and FAILED events of orders", sent, failedList)
		}
		for _, list := range []string{sent, failedList} {
			if code, body := get(t, srv, list, readToken); code != http.StatusOK {
				t.Errorf("%s: %d\n%s", list, code, body)
			}
		}
	}

	for _, bad := range []string{"/history?topic=%00", "/history?topic=a%00b", "/history?topic=%ff%fe"} {
		if code, body := get(t, srv, bad, readToken); code != http.StatusBadRequest || !strings.Contains(body, "topic") ||
			strings.Contains(body, "SQLSTATE") {
			t.Errorf("%s: %d %q, want 400 naming topic", bad, code, body)
		}
	}
}

// The Topics page shows each topic's events delivered and FAILED in the
// last hour, from the same per-minute counts, linked to its history; a
// topic without counts of its own says where they may be instead of 0.
func TestConsole_TopicsShowTheirDeliveredAndFailedInTheLastHour(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	seedMinutes(t, dbURL)
	// invoices: FAILED, never sent, so counted under (refused) (the seed
	// has (other) too): its last hour is not its own.
	addMinutes(t, dbURL, func(now time.Time) []store.MinuteCount {
		return []store.MinuteCount{{Minute: now, Topic: "(refused)", Failed: 1}}
	})
	if _, err := pgtest.Pool(t, dbURL).Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload) VALUES ('invoices', '{}') RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status, failure_reason) SELECT id, topic, 'FAILED', 'INVALID_TOPIC' FROM ev`); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv, "/topics", readToken)
	for topic, want := range map[string]string{
		"orders":   `<a href="/history\?topic=orders">1,200</a></td>\s*<td class="n"><a href="/history\?topic=orders">3</a>`,
		"payments": `<a href="/history\?topic=payments">7</a></td>\s*<td class="n"><a href="/history\?topic=payments">2</a>`,
		"invoices": `<td colspan="2">none of its own; in <a href="/history\?topic=%28other%29">\(other\)</a> or <a href="/history\?topic=%28refused%29">\(refused\)</a></td>`,
	} {
		row := regexp.MustCompile(`(?s)<td><a href="/events\?topic=` + topic + `">` + topic + `</a></td>.*?</tr>`).FindString(body)
		if code != http.StatusOK || !regexp.MustCompile(want).MatchString(row) {
			t.Errorf("/topics: %d, the row of %s lacks its last hour (%s):\n%s", code, topic, want, row)
		}
	}
}

// In Chromium: History is reached from the overview, draws its two charts
// (the hostile topic name runs nothing), filters by topic, and its counts
// lead to the topic's history and on to its FAILED events.
func TestBrowser_TheHistoryIsReachedFromTheOverviewAndLeadsToTheLists(t *testing.T) {
	srv, _, dbURL := serve(t, "")
	seedMinutes(t, dbURL)
	ctx := browser(t, readToken)
	var charts int
	var failedPath, topics, url1, delivered, url2, url3 string
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.Click(`nav a[href="/history"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`svg.chart`),
		chromedp.Evaluate(`[...document.querySelectorAll("svg.chart")].filter(s => s.getBoundingClientRect().width > 500).length`, &charts),
		chromedp.AttributeValue(`svg.chart path.failed`, "d", &failedPath, nil),
		chromedp.Text(`#history-topics`, &topics),
		chromedp.Click(`#history-topics a[href="/history?topic=orders"]`, chromedp.NodeVisible), chromedp.WaitVisible(`#history-delivered`),
		chromedp.Location(&url1), chromedp.Text(`#history-delivered`, &delivered),
		chromedp.Click(`#history-failed a`, chromedp.NodeVisible), chromedp.WaitVisible(`h1`), chromedp.Location(&url2),
		chromedp.Navigate(srv.URL+"/history"), chromedp.SetValue(`#history-filter input[name=topic]`, "payments"),
		chromedp.Submit(`#history-filter input[name=topic]`), chromedp.WaitVisible(`#history-delivered`), chromedp.Location(&url3))
	if charts != 2 || strings.Count(failedPath, "M") != 3 {
		t.Errorf("%d charts drawn, the FAILED one %q; want 2, and a line for each of the 3 minutes with failures", charts, failedPath)
	}
	if !strings.Contains(topics, hostileTopic) {
		t.Errorf("the topics %q lack the hostile name as text", topics)
	}
	if !strings.HasSuffix(url1, "/history?topic=orders") || delivered != "1,250" {
		t.Errorf("from orders' row: %s showing %q delivered, want its history with 1,250", url1, delivered)
	}
	if !strings.HasSuffix(url2, "/failed?topic=orders") {
		t.Errorf("orders' FAILED count leads to %s, want its FAILED list", url2)
	}
	if !strings.HasSuffix(url3, "/history?topic=payments") {
		t.Errorf("the topic filter leads to %s", url3)
	}
}
