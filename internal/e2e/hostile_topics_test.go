package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// Bounds for a writer of outbox.events who sends events to 20,000 distinct
// topics the relay refuses: the relay's /metrics stays small, and its live
// heap stays where it was (before topic labels were bounded, /metrics grew
// by 80,000 series, to 7.6 MB, and the relay's RSS by about 100 MB, for the
// life of the process).
const (
	refusedTopics    = 20000
	metricsSizeBound = 100 << 10
	heapGrowthBound  = 8 << 20
)

func TestHostileTopics_DistinctRefusedTopicsLeaveMetricsAndMemoryBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:1,dlq:1")
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	debugAddr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	relayProc := e.relay(t, "--topics", "orders", "--dead-letter-topic", "dlq", "--metrics-addr", metricsAddr,
		"--debug-addr", debugAddr, "--log-level", "error")

	// The same events, first to two topics, then to 20,000: what the relay
	// keeps per topic is the difference. The first round also warms up
	// every path the events take (refused, FAILED, dead-lettered) at the
	// same batch sizes.
	insert := func(topics string) {
		t.Helper()
		if _, err := e.pool.Exec(t.Context(), `
			INSERT INTO outbox.events (topic, key, payload)
			SELECT format(CASE WHEN s % 2 = 0 THEN 'refused.%s' ELSE 'not a topic %s' END, `+topics+`), 'k' || s, '{}'
			FROM generate_series(1, $1::int) AS s`, refusedTopics); err != nil {
			t.Fatal(err)
		}
	}
	e.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k' || s, '{}' FROM generate_series(1, 1000) AS s`)
	insert(`'same'`)
	e.waitSettled(t, 1000, refusedTopics)
	before := measure(t, metricsAddr, debugAddr)

	start := time.Now()
	insert(`s`)
	e.waitSettled(t, 1000, 2*refusedTopics)
	elapsed := time.Since(start)
	after := measure(t, metricsAddr, debugAddr)

	report(t, "%d events to distinct refused topics FAILED and dead-lettered in %s; from after as many to two topics to after "+
		"those: /metrics %d -> %d bytes (bound %d); relay heap after GC %.1f -> %.1f MiB (growth bound %d MiB); RSS %.1f -> %.1f MiB",
		refusedTopics, elapsed.Round(time.Millisecond), before.size, after.size, metricsSizeBound,
		mib(before.heap), mib(after.heap), heapGrowthBound>>20, mib(before.rss), mib(after.rss))
	if after.size > metricsSizeBound {
		t.Errorf("/metrics is %d bytes after the refused topics, over the %d-byte bound", after.size, metricsSizeBound)
	}
	if after.heap-before.heap > heapGrowthBound {
		t.Errorf("the relay's heap after GC grew by %.1f MiB, over the %d MiB bound", mib(after.heap-before.heap), heapGrowthBound>>20)
	}
	if after.refused != refusedTopics {
		t.Errorf(`events_failed_total{reason="TOPIC_NOT_ALLOWED",topic="(refused)"} = %v, want %d`, after.refused, refusedTopics)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED' AND attempts <> 0`); n != 0 {
		t.Errorf("%d refused events count an attempt, want none: they were never sent", n)
	}
	relayProc.signal(t, syscall.SIGTERM)
	if code := relayProc.wait(t, 30*time.Second); code != 0 {
		t.Errorf("relay exited with %d after SIGTERM, want 0", code)
	}
}

// waitSettled waits until sent events are SENT and failed ones FAILED with
// their dead letters published.
func (e *env) waitSettled(t *testing.T, sent, failed int) {
	t.Helper()
	pgtest.Eventually(t, 5*time.Minute, "events settled and dead-lettered", func() (bool, string) {
		s := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		f := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'`)
		d := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE dead_letter_status = 'SENT'`)
		return s == sent && f == failed && d == failed, fmt.Sprintf("%d SENT, %d FAILED, %d dead-lettered", s, f, d)
	})
}

func (e *env) exec(t *testing.T, sql string) {
	t.Helper()
	if _, err := e.pool.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

// relayFigures is what measure reads of a relay.
type relayFigures struct {
	size      int     // /metrics, in bytes
	heap, rss float64 // bytes: live heap right after a GC, resident set
	refused   float64 // TOPIC_NOT_ALLOWED events counted under (refused)
}

// measure has the relay collect its garbage (pprof's heap profile with
// gc=1), then reads its /metrics.
func measure(t *testing.T, metricsAddr, debugAddr string) relayFigures {
	t.Helper()
	get := func(url string) []byte {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return b
	}
	get("http://" + debugAddr + "/debug/pprof/heap?gc=1")
	body := get("http://" + metricsAddr + "/metrics")
	f := relayFigures{size: len(body)}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		switch name := line[:i]; name {
		case "go_memstats_heap_alloc_bytes":
			f.heap = v
		case "process_resident_memory_bytes":
			f.rss = v
		case `outbox_relay_events_failed_total{reason="TOPIC_NOT_ALLOWED",topic="(refused)"}`:
			f.refused = v
		}
	}
	return f
}

func mib(b float64) float64 { return b / (1 << 20) }
