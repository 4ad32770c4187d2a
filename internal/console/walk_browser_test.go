package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// An operator's walk through an incident in a browser: the Topics page from
// the overview, a topic's FAILED count to its list, a search by time range
// in the list's form, its next and previous pages and the other order; the
// held keys from the overview, paged with their total.
func TestBrowser_TopicsLeadToAFailedListSearchedByTimeAndWalkedBothWaysAndHeldKeysArePaged(t *testing.T) {
	srv, _, dbURL := serve(t, "")
	pool := pgtest.Pool(t, dbURL)
	// 120 FAILED events of topic orders, a minute apart from 10:00 UTC,
	// each holding its own key.
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload)
		            SELECT 'orders', 'held-' || lpad(i::text, 3, '0'), jsonb_build_object('i', i) FROM generate_series(1, 120) i
		            RETURNING id, topic, key, seq, (payload->>'i')::int AS i)
		INSERT INTO outbox.deliveries (event_id, topic, key, status, attempts, failure_reason, last_error, commit_lsn, tx_position, seq, updated_at)
		SELECT id, topic, key, 'FAILED', 1, 'MESSAGE_TOO_LARGE', 'too large ' || i, '0/0', 0, seq,
		       '2026-11-26T10:00:00Z'::timestamptz + i * interval '1 minute'
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, readToken)
	firstTime := `document.querySelector("#failed tr:nth-child(2) td:last-child").innerText`
	rowCount := `document.querySelectorAll("#failed tr").length - 1`
	var count, newest, oldest, afterPrev string
	var rows, nextRows, prevRows int
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), follow(`nav a[href="/topics"]`), follow(`#topics a[href="/failed?topic=orders"]`),
		chromedp.SetValue(`input[name="since"]`, "2026-11-26T10:10:00Z", chromedp.ByQuery),
		chromedp.SetValue(`input[name="until"]`, "2026-11-26T11:10:00Z", chromedp.ByQuery),
		loads(chromedp.Submit(`input[name="since"]`, chromedp.ByQuery)),
		chromedp.Text(`#count`, &count), chromedp.Evaluate(rowCount, &rows), chromedp.Evaluate(firstTime, &newest),
		follow(`#next`), chromedp.Evaluate(rowCount, &nextRows),
		follow(`#prev`), chromedp.Evaluate(rowCount, &prevRows),
		chromedp.Evaluate(firstTime, &afterPrev),
		follow(`#order`), chromedp.Evaluate(firstTime, &oldest))
	// 10:10 to 11:09: 60 events, newest first 50 then 10.
	if !strings.HasPrefix(count, "60 FAILED events match") || rows != 50 || nextRows != 10 || prevRows != 50 {
		t.Errorf("the search from 10:10 until 11:10: %q, pages of %d, %d, back to %d; want 60 in pages of 50 and 10", count, rows, nextRows, prevRows)
	}
	if newest != "2026-11-26 11:09:00.000 UTC" || afterPrev != newest || oldest != "2026-11-26 10:10:00.000 UTC" {
		t.Errorf("first rows: newest first %q (after previous %q), oldest first %q", newest, afterPrev, oldest)
	}
	var held string
	var heldRows []int
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), follow(`nav a[href="/held"]`), chromedp.Text(`#count`, &held))
	for {
		var n int
		var more bool
		run(t, ctx, chromedp.Evaluate(`document.querySelectorAll("#held tr").length - 1`, &n),
			chromedp.Evaluate(`document.querySelector("#next") !== null`, &more))
		heldRows = append(heldRows, n)
		if !more || len(heldRows) > 5 {
			break
		}
		run(t, ctx, follow(`#next`))
	}
	if !strings.HasPrefix(held, "120 held keys") || len(heldRows) != 3 || heldRows[0] != 50 || heldRows[1] != 50 || heldRows[2] != 20 {
		t.Errorf("held keys: %q in pages of %v, want 120 in pages of 50, 50, 20", held, heldRows)
	}
}

// follow clicks the link sel and waits until the page it leads to has
// loaded.
func follow(sel string) chromedp.Action {
	return loads(chromedp.Click(sel, chromedp.NodeVisible))
}

// loads does a, which leaves the page, and polls until the next page has
// loaded (not the page it was on, whose elements may be the same): an
// evaluation may fail while the page changes.
func loads(a chromedp.Action) chromedp.Tasks {
	var left bool
	return chromedp.Tasks{chromedp.Evaluate(`window.leaving = true`, &left), a, chromedp.ActionFunc(func(ctx context.Context) error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Second)
		for {
			var loaded bool
			err := chromedp.Evaluate(`!window.leaving && document.readyState === "complete"`, &loaded).Do(ctx)
			if err == nil && loaded {
				return nil
			}
			select {
			case <-tick.C:
			case <-deadline:
				return fmt.Errorf("the next page did not load in 10 s (%v)", err)
			}
		}
	})}
}
