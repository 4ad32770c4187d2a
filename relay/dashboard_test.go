package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/promtest"
	"github.com/outbox-relay/outbox-relay/retry"
)

const (
	dashboardPath = "../docs/grafana/outbox-relay-dashboard.json"
	rulesPath     = "../docs/prometheus/outbox-relay-rules.yml"
)

// panelQuery is one query of a dashboard panel, as Grafana would send it.
type panelQuery struct {
	panel, refID, legend, expr string
}

func panelQueries(t *testing.T, window time.Duration) []panelQuery {
	var out []panelQuery
	for _, p := range promtest.ReadDashboard(t, dashboardPath).Panels {
		for _, q := range p.Targets {
			out = append(out, panelQuery{panel: p.Title, refID: q.RefID, legend: q.LegendFormat, expr: promtest.Expand(q.Expr, window)})
		}
	}
	return out
}

// showing is the value of the series of q whose labels include want (all
// of them when want is empty), summed; ok is false when none matched.
func showing(samples []promtest.Sample, want map[string]string) (v float64, ok bool) {
	for _, s := range samples {
		match := true
		for k, w := range want {
			match = match && s.Labels[k] == w
		}
		if match {
			v, ok = v+s.Value, true
		}
	}
	return v, ok
}

// shows is what a panel query must show once the event it watches has
// happened: a series with these labels, above 0.
type shows struct {
	panel, refID string
	labels       map[string]string
}

// Prometheus (Debian's, scraping every second) watches a relay and its
// standby, the relay driven through a failure, a new topic, a Kafka outage
// that spills and cycles the breaker: every panel of the dashboard answers,
// those that watch an event show it, and the alerting rules fire.
func TestDashboard_PrometheusShowsAFailureANewTopicAnOutageAndTheBreakerCycle(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	opts := []kfake.Opt{kfake.SeedTopics(1, "orders", "payments", "dlt"), kfake.DataDir(t.TempDir())}
	b := setup(t, opts...)
	addr := b.cluster.ListenAddrs()[0]
	cfg := b.config(t)
	cfg.Kafka.DeadLetterTopic = "dlt"
	cfg.SpillAfter = time.Second
	cfg.Poll.Interval = 100 * time.Millisecond
	cfg.Retry = retry.Policy{Kind: retry.KindFixed, Delay: 100 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: 5, Jitter: retry.JitterNone}
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)
	standbyCfg := cfg
	standbyCfg.Poll.InstanceID = "standby"
	standby, _ := b.serveMetrics(t, standbyCfg)
	prom := promtest.Start(t, "outbox-relay", time.Second,
		[]string{strings.TrimPrefix(srv.URL, "http://"), strings.TrimPrefix(standby.URL, "http://")}, rulesPath)
	query := func(expr string) []promtest.Sample {
		t.Helper()
		s, err := prom.Query(expr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// eventually waits until Prometheus shows q's series with labels above 0.
	eventually := func(what string, q panelQuery, labels map[string]string) {
		t.Helper()
		pgtest.Eventually(t, 20*time.Second, what, func() (bool, string) {
			s := query(q.expr)
			v, _ := showing(s, labels)
			return v > 0, fmt.Sprintf("%s %s: %v", q.panel, q.refID, s)
		})
	}
	find := func(queries []panelQuery, panel, refID string) panelQuery {
		t.Helper()
		for _, q := range queries {
			if q.panel == panel && q.refID == refID {
				return q
			}
		}
		t.Fatalf("the dashboard has no panel %q with query %s", panel, refID)
		return panelQuery{}
	}
	rule := func(name string) string {
		t.Helper()
		rules, err := prom.Rules()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if r.Name == name {
				return r.Query
			}
		}
		t.Fatalf("Prometheus loaded no rule %s from %s", name, rulesPath)
		return ""
	}
	short := panelQueries(t, 4*time.Second) // Grafana's $__rate_interval at a 1 s scrape
	pgtest.Eventually(t, 20*time.Second, "Prometheus scraping both relays", func() (bool, string) {
		s := query(`count_over_time(up{job="outbox-relay"}[1m]) >= 3 and up == 1`)
		return len(s) == 2, fmt.Sprint(s)
	})
	eventually("the standby", find(short, "Standby", "A"), nil)
	// A standby is not ready by design: it is not counted.
	pgtest.Eventually(t, 20*time.Second, "no relay not ready beside a standby", func() (bool, string) {
		v, _ := showing(query(find(short, "Relays not ready", "A").expr), nil)
		return v == 0, fmt.Sprint(v)
	})

	// Events of a topic sent, one of a topic that does not exist (FAILED
	// INVALID_TOPIC, dead-lettered), then the first of a new topic.
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k1', '{}'), ('orders', 'k2', '{}')`)
	b.waitStatus(t, "SENT", 2, 30*time.Second)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('refunds', 'k1', '{}')`)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('payments', 'k1', '{}')`)
	b.waitStatus(t, "SENT", 3, 30*time.Second)
	eventually("the failure within a rate interval", find(short, "FAILED per second by reason", "A"),
		// a topic Kafka does not have is refused before sending: its events
		// count under the bounded label value (refused)
		map[string]string{"topic": "(refused)", "reason": "INVALID_TOPIC"})
	eventually("the new topic's first event within a rate interval", find(short, "Events per second by outcome", "A"),
		map[string]string{"topic": "payments"})
	if s := query(rule("OutboxRelayEventsFailed")); len(s) == 0 {
		t.Errorf("OutboxRelayEventsFailed does not fire after a failure")
	}

	// Kafka goes away: the relay is not ready, its breaker opens, it spills.
	b.cluster.Close()
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k' || i, '{}' FROM generate_series(1, 5) i`)
	for _, s := range []struct{ panel, refID, rule string }{
		{"Relays not ready", "A", "OutboxRelayNotReady"},
		{"Kafka breaker open", "A", "OutboxRelayKafkaBreakerOpen"},
		{"Spilling", "A", "OutboxRelaySpilling"},
	} {
		eventually("during the outage", find(short, s.panel, s.refID), nil)
		if got := query(rule(s.rule)); len(got) == 0 {
			t.Errorf("alert %s does not fire during the outage (%s shows it)", s.rule, s.panel)
		}
	}
	if v, _ := showing(query(find(short, "Scrape health and readiness", "B").expr), nil); v != 0 {
		t.Errorf("readiness during the outage: %v, want 0", v)
	}

	// Kafka is back: the breaker closes, the spilled events are delivered.
	restartKafka(t, addr, opts...)
	b.waitStatus(t, "SENT", 8, 60*time.Second)
	eventually("the breaker closed again", find(short, "Kafka circuit breaker", "B"), map[string]string{"to": "closed"})
	pgtest.Eventually(t, 20*time.Second, "no relay not ready", func() (bool, string) {
		v, _ := showing(query(find(short, "Relays not ready", "A").expr), nil)
		return v == 0, fmt.Sprint(v)
	})

	// Over the whole run, every panel answers and those watching what
	// happened show it.
	window := time.Since(begin) + 10*time.Second
	whole := panelQueries(t, window)
	noEvent := map[string]bool{ // panels of what this run does not exercise; they still answer
		"Mapped tables: events per second by outcome": true,
	}
	for _, q := range whole {
		s, err := prom.Query(q.expr)
		switch {
		case err != nil:
			t.Errorf("panel %q %s: %v", q.panel, q.refID, err)
		case len(s) == 0 && !noEvent[q.panel]:
			t.Errorf("panel %q %s (%s) shows no data over the run: %s", q.panel, q.refID, q.legend, q.expr)
		}
	}
	lag := query(find(whole, "Slot lag by slot", "A").expr)
	if _, ok := showing(lag, map[string]string{"slot": b.slot}); !ok || len(lag) != 1 {
		t.Errorf("slot lag: %v, want one line, of slot %s", lag, b.slot)
	}
	for _, w := range []shows{
		{"Events per second by outcome", "A", map[string]string{"topic": "payments"}},
		{"Events per second by outcome", "A", map[string]string{"topic": "orders"}},
		{"Events per second by outcome", "C", map[string]string{"topic": "(refused)"}},
		{"Events per second by outcome", "D", nil}, // queued in the spill
		{"FAILED per second by reason", "A", map[string]string{"topic": "(refused)", "reason": "INVALID_TOPIC"}},
		{"Events failed", "A", nil},
		{"Dead letters per second", "A", map[string]string{"topic": "(refused)", "outcome": "sent"}},
		{"Kafka circuit breaker", "B", map[string]string{"to": "open"}},
		{"Kafka circuit breaker", "B", map[string]string{"to": "closed"}},
		{"Streaming", "A", nil},
		{"Version", "A", map[string]string{"version": "test"}},
		{"Scrape health and readiness", "A", nil},
		{"Commit to Kafka ack, ack to durable status", "A", nil},
		{"Status statements p99", "A", map[string]string{"statement": "insert_outcomes"}},
		{"Poller and maintenance", "A", nil}, // the spilled events claimed
	} {
		q := find(whole, w.panel, w.refID)
		s := query(q.expr)
		if v, ok := showing(s, w.labels); !ok || v <= 0 {
			t.Errorf("panel %q %s (%s) over the run: %v for %v, want above 0: %s", w.panel, w.refID, q.legend, s, w.labels, q.expr)
		}
	}

	// Every rule Prometheus loaded evaluates without error.
	rules, err := prom.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Health == "err" {
			t.Errorf("rule %s: %s", r.Name, r.LastError)
		}
		if _, err := prom.Query(r.Query); err != nil {
			t.Errorf("rule %s: %v", r.Name, err)
		}
	}
	checkMetricsLint(t, srv)

	// The relay's endpoint goes away: Prometheus's up says so.
	srv.Close()
	eventually("the relay down", find(short, "Relays down", "A"), nil)
	if got := query(rule("OutboxRelayDown")); len(got) == 0 {
		t.Errorf("alert OutboxRelayDown does not fire with the relay's endpoint gone")
	}
	t.Logf("Prometheus run of %s, %d panel queries, %d rules", time.Since(begin).Round(time.Second), len(whole), len(rules))
}

// checkMetricsLint runs promtool check metrics on the relay's /metrics.
func checkMetricsLint(t *testing.T, srv *httptest.Server) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cmd := exec.Command(promtest.Binary(t, "promtool"), "check", "metrics")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("promtool check metrics: %v\n%s%s", err, out, body)
	}
}
