package metrics_test

import (
	"bufio"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/relay"
)

type prober struct{}

func (prober) Healthy() error { return nil }
func (prober) Ready() error   { return nil }

// scraper serves m's /metrics; each call of the returned func is one scrape,
// read into sample -> value ("name{labels}" as written).
// srvURL serves m's endpoints.
func srvURL(t *testing.T, m *metrics.Metrics) string {
	srv := httptest.NewServer(m.Handler(prober{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func scraper(t *testing.T, m *metrics.Metrics) func() map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(m.Handler(prober{}))
	t.Cleanup(srv.Close)
	return func() map[string]float64 {
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
}

// expect fails for each sample of want that got lacks or has another value.
func expect(t *testing.T, when string, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s is missing, want %v (a series born at its first increment shows no rate)", when, k, v)
		} else if g != v {
			t.Errorf("%s: %s = %v, want %v", when, k, g, v)
		}
	}
}

func TestMetrics_CountersKnownUpFrontExistAtZeroFromTheStart(t *testing.T) {
	scrape := scraper(t, metrics.New("test"))
	expect(t, "a fresh relay", scrape(), map[string]float64{
		`outbox_relay_kafka_breaker_transitions_total{to="closed"}`:    0,
		`outbox_relay_kafka_breaker_transitions_total{to="half-open"}`: 0,
		`outbox_relay_kafka_breaker_transitions_total{to="open"}`:      0,
		`outbox_relay_events_queued_total`:                             0,
	})
}

func TestMetrics_ANewTopicIsShownAtZeroForEveryReasonBeforeItsFirstEventsCount(t *testing.T) {
	m := metrics.New("test")
	m.CountDeadLetters()
	scrape := scraper(t, m)
	tally := m.NewTally()
	tally.Add("refunds", metrics.Published, "", false)
	tally.Add("refunds", metrics.Failed, "INVALID_TOPIC", false)
	tally.AddTable("public.orders", metrics.Sent)
	tally.Flush()
	m.DeadLettered("refunds", false, metrics.DeadLetterSent)
	// status and the console read the metrics too: that is not Prometheus
	// seeing the counters at 0.
	metrics.Scrape(context.Background(), srvURL(t, m)+"/metrics")

	zero := map[string]float64{
		`outbox_relay_events_published_total{topic="refunds"}`:                             0,
		`outbox_relay_events_sent_total{topic="refunds"}`:                                  0,
		`outbox_relay_events_retried_total{topic="refunds"}`:                               0,
		`outbox_relay_events_dead_lettered_total{outcome="sent",topic="refunds"}`:          0,
		`outbox_relay_events_dead_lettered_total{outcome="refused",topic="refunds"}`:       0,
		`outbox_relay_mapped_events_total{outcome="sent",table="public.orders"}`:           0,
		`outbox_relay_mapped_events_total{outcome="failed",table="public.orders"}`:         0,
		`outbox_relay_mapped_events_total{outcome="queued",table="public.orders"}`:         0,
		`outbox_relay_events_failed_total{reason="RETRIES_EXHAUSTED",topic="refunds"}`:     0,
		`outbox_relay_events_failed_total{reason="INVALID_TOPIC",topic="refunds"}`:         0,
		`outbox_relay_mapped_events_total{outcome="published",table="public.orders"}`:      0,
		`outbox_relay_events_failed_total{reason="UNAUTHORIZED_ON_TOPIC",topic="refunds"}`: 0,
		`outbox_relay_events_failed_total{reason="MESSAGE_TOO_LARGE",topic="refunds"}`:     0,
		`outbox_relay_events_failed_total{reason="INVALID_PARTITION",topic="refunds"}`:     0,
		`outbox_relay_events_failed_total{reason="INVALID_EVENT",topic="refunds"}`:         0,
		`outbox_relay_mapped_events_total{outcome="retried",table="public.orders"}`:        0,
	}
	expect(t, "the first scrape after the topic was seen", scrape(), zero)

	expect(t, "the next scrape", scrape(), map[string]float64{
		`outbox_relay_events_published_total{topic="refunds"}`:                     1,
		`outbox_relay_events_failed_total{reason="INVALID_TOPIC",topic="refunds"}`: 1,
		`outbox_relay_events_failed_total{reason="INVALID_EVENT",topic="refunds"}`: 0,
		`outbox_relay_events_dead_lettered_total{outcome="sent",topic="refunds"}`:  1,
		`outbox_relay_mapped_events_total{outcome="sent",table="public.orders"}`:   1,
	})

	// A topic already shown counts at once.
	tally.Add("refunds", metrics.Sent, "", false)
	tally.Flush()
	expect(t, "a known topic", scrape(), map[string]float64{`outbox_relay_events_sent_total{topic="refunds"}`: 1})
}

func TestMetrics_WithoutADeadLetterTopicNoDeadLetterSeries(t *testing.T) {
	m := metrics.New("test")
	scrape := scraper(t, m)
	tally := m.NewTally()
	tally.Add("orders", metrics.Sent, "", false)
	tally.Flush()
	for k := range scrape() {
		if strings.HasPrefix(k, "outbox_relay_events_dead_lettered_total") {
			t.Errorf("%s exported without --dead-letter-topic", k)
		}
	}
}

// Every failure reason the relay writes (the Reason* constants of
// internal/kafka and internal/store) has its counter from a topic's start.
func TestMetrics_FailureReasonsListsEveryReasonTheRelayWrites(t *testing.T) {
	var reasons []string
	for _, dir := range []string{"../kafka", "../store"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range vs.Names {
					if lit, ok := valueAt(vs, i).(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Reason") && lit.Kind == token.STRING {
						r, _ := strconv.Unquote(lit.Value)
						reasons = append(reasons, r)
					}
				}
				return true
			})
		}
	}
	if len(reasons) < 6 {
		t.Fatalf("found only the reasons %v: did the constants move?", reasons)
	}
	for _, r := range reasons {
		if !slices.Contains(metrics.FailureReasons, r) {
			t.Errorf("failure reason %s is not in metrics.FailureReasons: its counter is born at its first event, whose rate never shows", r)
		}
	}
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

// A histogram whose top bucket is below what it measures says only "more
// than the top" of the slowest statements: its p99 is the top bucket.
func TestMetrics_HistogramBucketsReachPastTheTimeoutsTheyMeasure(t *testing.T) {
	m := metrics.New("test")
	m.Statement.WithLabelValues("barrier")
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	timeout := relay.StatementTimeoutDefault.Seconds()
	want := map[string]float64{
		"outbox_relay_status_statement_duration_seconds": timeout,
		// A status write that ran out of --statement-timeout and was retried.
		"outbox_relay_ack_to_durable_seconds": 2 * timeout,
	}
	for _, f := range families {
		timeout, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		if top := topBucket(f); top <= timeout {
			t.Errorf("%s: top bucket %v s, not above the %v s timeout it measures", f.GetName(), top, timeout)
		}
	}
	if len(want) > 0 {
		t.Errorf("histograms not found: %v", want)
	}
}

func topBucket(f *dto.MetricFamily) float64 {
	var top float64
	for _, m := range f.GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			top = max(top, b.GetUpperBound())
		}
	}
	return top
}

// Two instances of one slot read its lag at different moments: the lag is
// labelled by slot, so a dashboard draws one line per slot, and Scrape
// (status, the console) still reads it.
func TestMetrics_SlotLagIsLabelledBySlotAndScrapeReadsIt(t *testing.T) {
	m := metrics.New("test")
	m.SetSlotLag("outbox_relay", 1234)
	scrape := scraper(t, m)
	expect(t, "after a reading", scrape(), map[string]float64{`outbox_relay_slot_lag_bytes{slot="outbox_relay"}`: 1234})
	srv := httptest.NewServer(m.Handler(prober{}))
	t.Cleanup(srv.Close)
	if rs := metrics.Scrape(context.Background(), srv.URL+"/metrics"); rs.SlotLag != 1234 || rs.Error != "" {
		t.Errorf("Scrape: slot lag %v (error %q), want 1234", rs.SlotLag, rs.Error)
	}
}
