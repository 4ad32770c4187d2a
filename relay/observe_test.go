package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
	"github.com/outbox-relay/outbox-relay/retry"
)

// serveMetrics runs a relay with its own metrics behind an HTTP server, as
// `outbox-relay run` serves them.
func (b *testBundle) serveMetrics(t *testing.T, cfg relay.Config) (*httptest.Server, func() error) {
	t.Helper()
	cfg.Metrics = metrics.New("test")
	r, stop := b.runRelay(t, cfg)
	srv := httptest.NewServer(cfg.Metrics.Handler(r))
	t.Cleanup(srv.Close)
	return srv, stop
}

// scrape reads /metrics into sample -> value ("name{labels}" as written).
func scrape(t *testing.T, srv *httptest.Server) map[string]float64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// probe GETs a health endpoint and returns its status code and reason.
func probe(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Status, Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, body.Reason
}

func TestMetrics_CountersEqualWhatHappened(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders", "flaky"))
	// The first produce to "flaky" is rejected with an error that is neither
	// an outage nor the message's fault: retried, then sent.
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "flaky", Err: kerr.UnknownServerError, Count: 1})
	cfg := b.config(t)
	cfg.Retry = retry.Policy{Kind: retry.KindFixed, Delay: 50 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: 5, Jitter: retry.JitterNone}
	cfg.Poll.Interval = 20 * time.Millisecond
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload, headers) VALUES
		('orders', 'k', '{"n": 1}', NULL), ('orders', 'k', '{"n": 2}', NULL), ('orders', 'k', '{"n": 3}', NULL),
		('orders', 'k', '{"n": 4}', NULL), ('orders', 'k', '{"n": 5}', NULL),
		('missing', 'k', '{"n": 7}', NULL),
		('flaky', 'k', '{"n": 8}', NULL)`)
	b.waitStatus(t, "SENT", 6, 30*time.Second)
	// An invalid event of a topic the relay has sent to counts under its name.
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload, headers) VALUES ('orders', 'k', '{"n": 6}', '["not", "an", "object"]')`)
	b.waitStatus(t, "FAILED", 2, 30*time.Second)

	want := map[string]float64{
		`outbox_relay_events_published_total{topic="orders"}`:                               5,
		`outbox_relay_events_published_total{topic="flaky"}`:                                2,
		`outbox_relay_events_sent_total{topic="orders"}`:                                    5,
		`outbox_relay_events_sent_total{topic="flaky"}`:                                     1,
		`outbox_relay_events_retried_total{topic="flaky"}`:                                  1,
		`outbox_relay_events_failed_total{reason="INVALID_EVENT",topic="orders"}`:           1,
		`outbox_relay_events_failed_total{reason="INVALID_TOPIC",topic="(refused)"}`:        1, // never sent: no topic label of its own
		`outbox_relay_poller_claimed_total`:                                                 1,
		`outbox_relay_role{role="streaming"}`:                                               1,
		`outbox_relay_kafka_breaker_state{state="closed"}`:                                  1,
		`outbox_relay_commit_to_ack_seconds_count`:                                          5, // streamed events Kafka acknowledged
		`outbox_relay_status_statement_duration_seconds_count{statement="record_outcomes"}`: 1,
	}
	var got map[string]float64
	pgtest.Eventually(t, 10*time.Second, "counters as expected", func() (bool, string) {
		got = scrape(t, srv)
		var diffs []string
		for k, v := range want {
			if got[k] != v {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, got[k], v))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
	if got[`outbox_relay_status_statement_duration_seconds_count{statement="insert_outcomes"}`] < 1 ||
		got[`outbox_relay_status_statement_duration_seconds_count{statement="barrier"}`] < 1 ||
		got[`outbox_relay_ack_to_durable_seconds_count`] < 1 {
		t.Errorf("statement and durability timings were not observed")
	}
	if code, reason := probe(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, reason)
	}
}

func TestProbes_NotReadyDuringAKafkaOutageOrAsAStandby(t *testing.T) {
	t.Parallel()
	b, restart := setupRestartable(t)
	cfg := b.config(t)
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)
	// The server says the slot streams as soon as replication starts; the
	// relay says it is ready once it has opened the stream, a moment later.
	pgtest.Eventually(t, 10*time.Second, "ready while streaming", func() (bool, string) {
		code, reason := probe(t, srv, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, reason)
	})
	expectReadyGauge(t, srv, 1)

	standbyCfg := cfg
	standbyCfg.Poll.InstanceID = "standby"
	standby, _ := b.serveMetrics(t, standbyCfg)
	pgtest.Eventually(t, 10*time.Second, "standby not ready", func() (bool, string) {
		code, reason := probe(t, standby, "/readyz")
		return code == http.StatusServiceUnavailable && strings.HasPrefix(reason, "standby"), fmt.Sprintf("%d %s", code, reason)
	})
	expectReadyGauge(t, standby, 0)

	b.cluster.Close()
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
	pgtest.Eventually(t, 30*time.Second, "not ready during the outage", func() (bool, string) {
		code, reason := probe(t, srv, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(reason, "kafka"), fmt.Sprintf("%d %s", code, reason)
	})
	expectReadyGauge(t, srv, 0)
	restart()
	pgtest.Eventually(t, 60*time.Second, "ready after the outage", func() (bool, string) {
		code, reason := probe(t, srv, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, reason)
	})
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	if code, reason := probe(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after the outage: %d %s", code, reason)
	}
}

// expectReadyGauge checks outbox_relay_ready says what /readyz says.
func expectReadyGauge(t *testing.T, srv *httptest.Server, want float64) {
	t.Helper()
	if got, ok := scrape(t, srv)["outbox_relay_ready"]; !ok || got != want {
		t.Errorf("outbox_relay_ready = %v (exported: %v), want %v as /readyz says", got, ok, want)
	}
}

func TestRetention_DeletesOnlySENTEventsOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	seedAges(t, b)
	cfg := b.config(t)
	cfg.Retention = 7 * 24 * time.Hour
	cfg.Poll.Interval = time.Hour // the poller must not deliver the old PENDING row meanwhile
	b.startRelay(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "old SENT events deleted", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.events WHERE payload->>'age' = 'old-sent'`)
		return n == 0, fmt.Sprintf("%d left", n)
	})
	expectAges(t, b, "recent-sent", "old-failed", "old-pending")
}

// seedAges builds events of each kind the retention must tell apart.
func seedAges(t *testing.T, b *testBundle) {
	t.Helper()
	b.exec(t, `WITH ev AS (
		INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', jsonb_build_object('age', a), CASE WHEN a LIKE 'old%' THEN now() - interval '10 days' ELSE now() - interval '1 day' END
		FROM unnest(ARRAY['old-sent', 'old-sent', 'recent-sent', 'old-failed', 'old-pending']) AS a RETURNING id, payload->>'age' AS a)
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, failure_reason)
		SELECT id, CASE WHEN a LIKE '%sent' THEN 'SENT' WHEN a LIKE '%failed' THEN 'FAILED' ELSE 'PENDING' END, 1,
		       now() + interval '1 hour', CASE WHEN a LIKE '%failed' THEN 'INVALID_TOPIC' END
		FROM ev`)
}

// expectAges checks exactly these kinds of seeded events are left, each
// with its delivery row.
func expectAges(t *testing.T, b *testBundle, ages ...string) {
	t.Helper()
	var left []string
	rows, err := b.pool.Query(context.Background(), `SELECT e.payload->>'age' FROM outbox.events e
		JOIN outbox.deliveries d ON d.event_id = e.id ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		left = append(left, a)
	}
	if want := strings.Join(sortedCopy(ages), ","); strings.Join(left, ",") != want {
		t.Fatalf("events left with their rows: %v, want %s", left, want)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries`); n != len(ages) {
		t.Fatalf("%d delivery rows, want %d: rows of deleted events must go with them", n, len(ages))
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestPurge_DeletesExactlyTheOldEventsOfTheStatusAndLeavesPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedAges(t, b)
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.purge('7 days')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("outbox.purge('7 days') = %d, %v; want the 2 old SENT events", n, err)
	}
	expectAges(t, b, "recent-sent", "old-failed", "old-pending")
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.purge('7 days', 'FAILED', batch => 10)`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("outbox.purge('7 days', 'FAILED') = %d, %v; want the old FAILED event", n, err)
	}
	expectAges(t, b, "recent-sent", "old-pending")
	if _, err := b.pool.Exec(context.Background(), `SELECT outbox.purge('1 second', 'PENDING')`); err == nil ||
		!strings.Contains(err.Error(), "SENT, FAILED or SKIPPED") {
		t.Fatalf("purging PENDING events: %v, want a refusal", err)
	}
}
