package main

import (
	"context"
	"crypto/md5" //nolint:gosec // the bench's event ids, as PostgreSQL's md5 makes them
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// consolePages are the console pages the console phase times: the
// overview and the event list by each filter, on the backfill's rows, and
// the History of the minutes the relay counted them in.
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
	{"history", "/history"},
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
	srv, closeConsole, err := b.consoleServer()
	if err != nil {
		return err
	}
	defer closeConsole()
	fmt.Fprintf(os.Stderr, "console: %d status rows, each page %d times\n", rows, b.o.consoleRuns)
	for _, p := range consolePages {
		ms, err := b.timePage(ctx, srv.URL+p.path, "")
		if err != nil {
			return fmt.Errorf("console %s: %w", p.name, err)
		}
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

// incidentPages are what an operator opens in an incident, timed by the
// console incident phase: the pages, then the confirmations of the actions
// they offer (a POST without confirm=yes changes nothing). since and until
// bound the FAILED search by time: a span of the FAILED rows' failure times
// (a hundred seconds of the incident's, about 100,000 rows).
func incidentPages(since, until time.Time) []struct{ name, path, form string } {
	span := url.Values{"since": {since.UTC().Format(time.RFC3339)}, "until": {until.UTC().Format(time.RFC3339)}}.Encode()
	return []struct{ name, path, form string }{
		{"overview", "/", ""},
		{"FAILED", "/failed", ""},
		{"FAILED oldest first", "/failed?order=oldest", ""},
		{"FAILED topic=orders", "/failed?topic=orders", ""},
		{"FAILED topic=rare", "/failed?topic=rare", ""},
		{"FAILED reason=INVALID_EVENT", "/failed?reason=INVALID_EVENT", ""},
		{"FAILED event_type=order.cancelled", "/failed?event_type=order.cancelled", ""},
		{"FAILED key=k7990 (rare)", "/failed?key=k7990", ""},
		{"FAILED key=k1 (orders)", "/failed?key=k1", ""},
		{"FAILED error_contains=said", "/failed?error_contains=said", ""},
		{"FAILED error_contains (none match)", "/failed?error_contains=no+such+text", ""},
		{"FAILED since..until", "/failed?" + span, ""},
		{"FAILED since..until topic=topic-1", "/failed?topic=topic-1&" + span, ""},
		{"held keys", "/held", ""},
		{"topics", "/topics", ""},
		{"history", "/history", ""},
		{"events status=FAILED", "/events?status=FAILED", ""},
		{"events key=k7990", "/events?key=k7990", ""},
		{"event with 10 failed attempts", "/events/" + incidentID(7990), ""},
		{"key (held, rare)", "/keys?topic=rare&key=k7990", ""},
		{"key (orders)", "/keys?topic=orders&key=k1", ""},
		{"confirm skip all FAILED", "/skip", "match=yes"},
		{"confirm skip topic=rare", "/skip", "match=yes&topic=rare"},
		{"confirm resend reason=INVALID_EVENT", "/resend", "match=yes&reason=INVALID_EVENT"},
		{"confirm skip key=k7990", "/skip", "match=yes&key=k7990"},
		{"confirm resend event_type=order.cancelled", "/resend", "match=yes&event_type=order.cancelled"},
		{"confirm skip error_contains=said", "/skip", "match=yes&error_contains=said"},
		{"confirm skip since..until", "/skip", "match=yes&" + span},
		{"confirm resend one event", "/resend", "id=" + incidentID(7990)},
	}
}

// incidentID is the id of the incident phase's i-th event (md5('e' || i)
// as a uuid, as the phase writes them).
func incidentID(i int) string {
	h := fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("e%d", i))))
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// incidentPhase times the console in an incident (--console-incident
// status rows, a million by default): a quarter of them FAILED over five
// topics and four reasons, skewed (80% on topic orders with INVALID_TOPIC,
// about 600 on topic rare), holding 8,000 keys; the rest SENT. Each page and
// confirmation --console-runs times; then again right after 200,000 of the
// FAILED (topic orders) are skipped, before any vacuum (autovacuum is off
// on outbox.deliveries meanwhile).
func (b *bench) incidentPhase(ctx context.Context) error {
	n := b.o.consoleIncident
	failed := n / 4
	// The FAILED rows failed a millisecond apart back from now: the search
	// by time asks for the middle 40% of them.
	now := time.Now()
	pages := incidentPages(now.Add(-time.Duration(failed)*800*time.Microsecond), now.Add(-time.Duration(failed)*400*time.Microsecond))
	fmt.Fprintf(os.Stderr, "console incident: writing %d status rows, %d FAILED\n", n, failed)
	for _, s := range []string{
		`TRUNCATE outbox.events CASCADE`,
		`ALTER TABLE outbox.deliveries SET (autovacuum_enabled = false)`,
		// Each key on one topic: keys k0..k6399 on orders (80% of the
		// FAILED rows), k7981..k7999 on rare (about 600), the others over
		// topic-0..2; every FAILED row keyed, SENT rows without a key.
		fmt.Sprintf(`INSERT INTO outbox.events (id, topic, key, payload, event_type, created_at)
			SELECT md5('e' || i)::uuid,
			       CASE WHEN i > %[2]d THEN 'bench' WHEN i %% 8000 < 6400 THEN 'orders' WHEN i %% 8000 >= 7981 THEN 'rare'
			            ELSE 'topic-' || (i %% 8000) %% 3 END,
			       CASE WHEN i <= %[2]d THEN 'k' || i %% 8000 END, '{}',
			       CASE WHEN i %% 5 = 0 THEN 'order.cancelled' ELSE 'order.placed' END, now() - i * interval '1 ms'
			FROM generate_series(1, %[1]d) i`, n, failed),
		fmt.Sprintf(`INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, topic, key,
			                                   commit_lsn, tx_position, updated_at, sent_at)
			SELECT e.id, CASE WHEN i > %[2]d THEN 'SENT' ELSE 'FAILED' END, 1,
			       CASE WHEN i > %[2]d THEN NULL WHEN e.topic = 'orders' THEN 'INVALID_TOPIC'
			            ELSE (ARRAY['INVALID_TOPIC', 'MESSAGE_TOO_LARGE', 'INVALID_EVENT', 'RETRIES_EXHAUSTED'])[1 + i %% 4] END,
			       CASE WHEN i <= %[2]d THEN 'broker said no' END,
			       CASE WHEN i <= %[2]d THEN e.topic END, CASE WHEN i <= %[2]d THEN e.key END,
			       CASE WHEN i <= %[2]d THEN '0/0'::pg_lsn END, CASE WHEN i <= %[2]d THEN 0 END,
			       now() - i * interval '1 ms', CASE WHEN i > %[2]d THEN now() END
			FROM generate_series(1, %[1]d) i JOIN outbox.events e ON e.id = md5('e' || i)::uuid`, n, failed),
		// Ten failed attempts of each of the first 8,000 FAILED events
		// (an event's page shows them).
		fmt.Sprintf(`INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
			SELECT md5('e' || i)::uuid, a, now() - i * interval '1 ms' - (10 - a) * interval '1 s',
			       CASE WHEN a = 10 THEN 'RETRIES_EXHAUSTED' END, 'broker said no (attempt ' || a || ')'
			FROM generate_series(1, %d) i, generate_series(1, 10) a`, min(failed, 8000)),
		`VACUUM ANALYZE outbox.events`, `VACUUM ANALYZE outbox.deliveries`, `VACUUM ANALYZE outbox.delivery_attempts`,
	} {
		if err := b.exec(ctx, s); err != nil {
			return fmt.Errorf("console incident: %w", err)
		}
	}
	defer b.exec(context.WithoutCancel(ctx), `ALTER TABLE outbox.deliveries RESET (autovacuum_enabled)`) //nolint:errcheck // best effort
	srv, closeConsole, err := b.consoleServer()
	if err != nil {
		return err
	}
	defer closeConsole()
	if err := b.timeIncident(ctx, srv.URL, pages, n, fmt.Sprintf("%d FAILED", failed)); err != nil {
		return err
	}
	var skipped int64
	if err := b.pool.QueryRow(ctx, `SELECT outbox.skip_failed(p_topic => 'orders')`).Scan(&skipped); err != nil {
		return fmt.Errorf("console incident: skipping topic orders: %w", err)
	}
	return b.timeIncident(ctx, srv.URL, pages, n, fmt.Sprintf("%d FAILED, %d just skipped, not vacuumed", failed, skipped))
}

// timeIncident requests each of pages (incidentPages) --console-runs times.
func (b *bench) timeIncident(ctx context.Context, base string, pages []struct{ name, path, form string }, rows int, state string) error {
	fmt.Fprintf(os.Stderr, "console incident (%s): each page %d times\n", state, b.o.consoleRuns)
	for _, p := range pages {
		ms, err := b.timePage(ctx, base+p.path, p.form)
		if err != nil {
			return fmt.Errorf("console incident %s: %w", p.name, err)
		}
		b.res = append(b.res, Result{Phase: "console incident: " + p.name + " (" + state + ")", Events: rows, P50ms: ms[len(ms)/2],
			P95ms: ms[len(ms)*95/100], MaxMs: ms[len(ms)-1],
			Description: fmt.Sprintf("the console's %s on %d status rows (%s), %d requests", p.path, rows, state, len(ms))})
		fmt.Fprintf(os.Stderr, "  %-40s p50 %7.1f ms  max %7.1f ms\n", p.name, ms[len(ms)/2], ms[len(ms)-1])
	}
	return nil
}

// timePage requests url (a GET, or with form a POST) --console-runs times
// and returns each request's milliseconds, sorted.
func (b *bench) timePage(ctx context.Context, url, form string) ([]float64, error) {
	var ms []float64
	for range b.o.consoleRuns {
		start := time.Now()
		var err error
		if form == "" {
			err = getPage(ctx, url)
		} else {
			err = postPage(ctx, url, form)
		}
		if err != nil {
			return nil, err
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(ms)
	return ms, nil
}

func postPage(ctx context.Context, url, form string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(form))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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

// consoleServer serves the console (keys held, as with
// --failed-key-policy hold) over the bench's database on a loopback port;
// stop stops it and closes its store.
func (b *bench) consoleServer() (srv *httptest.Server, stop func(), err error) {
	st, err := store.Open(b.o.dbURL, 30*time.Second)
	if err != nil {
		return nil, nil, err
	}
	c, err := console.New(st, console.Config{FailedKeyPolicy: "hold"})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	srv = httptest.NewServer(c.Handler())
	return srv, func() { srv.Close(); st.Close() }, nil
}
