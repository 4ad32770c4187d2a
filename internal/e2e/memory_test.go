package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// rssBound is the peak resident memory the relay must stay under while it
// relays one transaction of 200,000 events, whatever the transaction's size:
// the in-flight window (10,000 events / 16 MiB by default) bounds it.
const rssBound = 100 << 20

func TestHugeTransaction_MemoryStaysBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:3")
	relayProc := e.relay(t)
	const n = 200000
	start := time.Now()
	if _, err := e.pool.Exec(context.Background(), `
		INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || (s % 1000), jsonb_build_object('s', s, 'pad', repeat('x', 400))
		FROM generate_series(1, $1) AS s`, n); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 5*time.Minute, "200,000 events SENT", func() (bool, string) {
		got := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		return got == n, fmt.Sprintf("%d of %d SENT", got, n)
	})
	elapsed := time.Since(start)
	rss := relayProc.peakRSS(t)
	report(t, "one transaction of %d events (~500 B payloads) relayed in %s; relay peak RSS %.1f MiB (bound %d MiB)",
		n, elapsed.Round(time.Millisecond), float64(rss)/(1<<20), rssBound>>20)
	if rss > rssBound {
		t.Errorf("relay peak RSS %.1f MiB exceeds the %d MiB bound", float64(rss)/(1<<20), rssBound>>20)
	}
	relayProc.signal(t, syscall.SIGTERM)
	if code := relayProc.wait(t, 30*time.Second); code != 0 {
		t.Errorf("relay exited with %d after SIGTERM, want 0", code)
	}
}
