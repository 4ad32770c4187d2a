package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// consolePages are the console pages the console phase times: the
// overview and the event list by each filter, on the backfill's rows.
var consolePages = []struct{ name, path string }{
	{"overview", "/"},
	{"events", "/events"},
	{"events status=FAILED", "/events?status=FAILED"},
	{"events status=SKIPPED", "/events?status=SKIPPED"},
	{"events key", "/events?key=customer-17"},
	{"events key+status=FAILED", "/events?key=customer-17&status=FAILED"},
	{"events topic (none match)", "/events?topic=no-such-topic"},
	{"events reason", "/events?reason=MESSAGE_TOO_LARGE"},
	{"FAILED", "/failed"},
	{"held keys", "/held"},
}

// consolePhase times the operator console's pages on the status rows the
// backfill left (--backfill-events, a million by default), 1,000 of them
// made FAILED: each page --console-runs times, through the console's
// handler as `outbox-relay console` serves it.
func (b *bench) consolePhase(ctx context.Context) error {
	rows := 0
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries`).Scan(&rows); err != nil {
		return err
	}
	err := b.exec(ctx, `UPDATE outbox.deliveries SET status = 'FAILED', failure_reason = 'MESSAGE_TOO_LARGE',
		last_error = 'kafka: message was too large', topic = e.topic, key = e.key, updated_at = now()
		FROM (SELECT id, topic, key FROM outbox.events ORDER BY id LIMIT 1000) e WHERE e.id = event_id`)
	if err != nil {
		return fmt.Errorf("console: making 1,000 events FAILED: %w", err)
	}
	st, err := store.Open(b.o.dbURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := console.New(st, console.Config{})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	fmt.Fprintf(os.Stderr, "console: %d status rows, each page %d times\n", rows, b.o.consoleRuns)
	for _, p := range consolePages {
		var ms []float64
		for range b.o.consoleRuns {
			start := time.Now()
			if err := getPage(ctx, srv.URL+p.path); err != nil {
				return fmt.Errorf("console %s: %w", p.name, err)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		slices.Sort(ms)
		b.res = append(b.res, Result{Phase: "console: " + p.name, Events: rows, P50ms: ms[len(ms)/2],
			P95ms: ms[len(ms)*95/100], MaxMs: ms[len(ms)-1],
			Description: fmt.Sprintf("the console's page %s on %d status rows (1,000 FAILED), %d requests", p.path, rows, len(ms))})
	}
	return nil
}

func getPage(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}
