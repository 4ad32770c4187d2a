package relay_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// livenessSetup runs a relay whose every connection to PostgreSQL goes
// through a proxy the test can freeze, with a 5s replication and statement
// timeout, and waits until it streams.
func livenessSetup(t *testing.T) (*testBundle, *pgtest.Proxy, *relay.Relay, relay.Config) {
	t.Helper()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	proxy, viaProxy := pgtest.NewProxy(t, b.dbURL)
	cfg := b.config(t)
	cfg.DatabaseURL = viaProxy
	cfg.ReplicationTimeout = 5 * time.Second
	cfg.StatementTimeout = 5 * time.Second
	r, _ := b.runRelay(t, cfg)
	b.waitStreaming(t, cfg)
	return b, proxy, r, cfg
}

// readiness records every reason /readyz gave until the test ends.
type readiness struct {
	mu      sync.Mutex
	reasons []string
}

func watchReadiness(t *testing.T, r *relay.Relay) *readiness {
	rd := &readiness{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := r.Ready(); err != nil {
					rd.mu.Lock()
					rd.reasons = append(rd.reasons, err.Error())
					rd.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return rd
}

// all is every reason /readyz gave so far. The watcher appends until the
// test ends, so reasons are read only through it (or said), under the lock.
func (rd *readiness) all() []string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return slices.Clone(rd.reasons)
}

// said reports whether /readyz gave a reason containing any of substrs.
func (rd *readiness) said(substrs ...string) bool {
	for _, r := range rd.all() {
		for _, sub := range substrs {
			if strings.Contains(r, sub) {
				return true
			}
		}
	}
	return false
}

// The two reasons /readyz gives for a silent stream: while it waits, and
// once it has given up on the connection.
var silentReasons = []string{"nothing from postgres on the replication connection", "went silent"}

// writeAcrossFreeze writes n events straight to PostgreSQL (not through the
// proxy), calls freeze halfway, and returns once all are committed; freeze
// must have frozen at least want connections (what says which).
func writeAcrossFreeze(t *testing.T, b *testBundle, n int, freeze func() int, want int, what string) {
	t.Helper()
	half := make(chan struct{})
	written := writeEvents(t, b, n, half)
	<-half
	if frozen := freeze(); frozen < want {
		t.Fatalf("froze %d connections, want %s", frozen, what)
	}
	<-written
}

func TestLiveness_AFrozenNetworkPathIsDetectedAndEveryEventIsDelivered(t *testing.T) {
	t.Parallel()
	b, proxy, r, cfg := livenessSetup(t)
	rd := watchReadiness(t, r)

	const n = 2000
	writeAcrossFreeze(t, b, n, proxy.Freeze, 2, "the replication connection and the pool's")
	b.waitStreaming(t, cfg) // a new walsender, through a new connection
	const after = 500
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || (s % 5), jsonb_build_object('seq', s) FROM generate_series($1::int, $2::int) AS s`, n+1, n+after)
	b.waitStatus(t, "SENT", n+after, cfg.ReplicationTimeout+30*time.Second)
	checkDelivered(t, b, n+after)
	if !rd.said(silentReasons...) {
		t.Errorf("/readyz never said the stream was silent; it said: %q", rd.all())
	}
}

func TestLiveness_FrozenPoolConnectionsAreReplacedAndEveryEventIsDelivered(t *testing.T) {
	t.Parallel()
	b, proxy, r, cfg := livenessSetup(t)
	rd := watchReadiness(t, r)
	const n = 2000
	writeAcrossFreeze(t, b, n, proxy.FreezeQueries, 1, "the pool's")
	b.waitStatus(t, "SENT", n, cfg.ReplicationTimeout+30*time.Second)
	checkDelivered(t, b, n)
	t.Logf("/readyz said: %q", rd.all())
}

func TestLiveness_AnIdleStreamStaysConnectedAndASilentServerIsDetectedWithinTheTimeout(t *testing.T) {
	t.Parallel()
	b, proxy, r, cfg := livenessSetup(t)
	rd := watchReadiness(t, r)
	pid := func() int {
		return pgtest.Count(t, b.pool, `SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots WHERE slot_name = $1`, b.slot)
	}
	first := pid()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		if p := pid(); p != first {
			t.Fatalf("the idle relay reconnected: walsender %d, then %d (/readyz said %q)", first, p, rd.all())
		}
	}
	if reasons := rd.all(); len(reasons) > 0 {
		t.Fatalf("/readyz was not ready while idle: %q", reasons)
	}

	proxy.Freeze()
	frozeAt := time.Now()
	pgtest.Eventually(t, cfg.ReplicationTimeout+3*time.Second, "/readyz to report the silence", func() (bool, string) {
		return rd.said(silentReasons...), time.Since(frozeAt).String()
	})
	t.Logf("silence reported %s after the freeze", time.Since(frozeAt).Round(100*time.Millisecond))
	// The frozen walsender still shows as streaming until the relay ends
	// it, so waitStreaming alone could see the old one.
	pgtest.Eventually(t, 30*time.Second, "a new walsender streaming the slot", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_replication_slots s
			JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = $1 AND r.state = 'streaming' AND r.pid <> $2`, b.slot, first)
		return n == 1, fmt.Sprintf("walsender %d of the slot, %d new ones streaming", pid(), n)
	})
}
