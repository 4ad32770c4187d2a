package relay_test

import (
	"context"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// setupRestartable is setup with the topic orders (3 partitions) on a
// broker that keeps its data on disk; restart starts it again on the same
// port, after the test closed it.
func setupRestartable(t *testing.T) (b *testBundle, restart func()) {
	t.Helper()
	dir := t.TempDir()
	opts := []kfake.Opt{kfake.SeedTopics(3, "orders"), kfake.DataDir(dir)}
	b = setup(t, opts...)
	addr := b.cluster.ListenAddrs()[0]
	return b, func() { restartKafka(t, addr, opts...) }
}

// restartKafka starts a one-broker cluster with opts on addr's port, where
// the test closed one; it is closed at cleanup.
func restartKafka(t *testing.T, addr string, opts ...kfake.Opt) {
	t.Helper()
	_, p, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("broker address %q: %v", addr, err)
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port)}, opts...)...)
	if err != nil {
		t.Fatalf("restarting kfake on %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
}

// writeEvents commits n events, one small transaction at a time, keyed over
// 5 keys with a global sequence in the payload; it signals progress on half.
func writeEvents(t *testing.T, b *testBundle, n int, half chan<- struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			if _, err := b.pool.Exec(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
				VALUES ('orders', 'k' || ($1::int % 5), jsonb_build_object('seq', $1::int))`, i); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			if i == n/2 && half != nil {
				close(half)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return done
}

// checkDelivered asserts every event is SENT after exactly one attempt and on
// Kafka in commit order per key (duplicates allowed, first copies in order).
func checkDelivered(t *testing.T, b *testBundle, n int) {
	t.Helper()
	if os.Getenv("DUMP_ON_STALL") != "" {
		timer := time.AfterFunc(15*time.Second, func() { _ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1) })
		defer timer.Stop()
	}
	b.waitStatus(t, "SENT", n, 20*time.Second)
	if bad := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status <> 'SENT' OR attempts <> 1`); bad != 0 {
		t.Fatalf("%d rows are not SENT after exactly one attempt", bad)
	}
	b.onKafkaInOrder(t, n)
}

func TestRelay_KafkaDownIsNotAnEventFailure(t *testing.T) {
	t.Parallel()
	b, restart := setupRestartable(t)
	b.startRelay(t, b.config(t))

	const n = 600
	half := make(chan struct{})
	written := writeEvents(t, b, n, half)
	<-half
	b.cluster.Close()
	downFor := 15 * time.Second
	time.Sleep(downFor) // the outage itself: nothing to wait on but the clock
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status <> 'SENT'`); n != 0 {
		t.Fatalf("%d events changed to another status than SENT while Kafka was down", n)
	}
	restart()
	<-written
	checkDelivered(t, b, n)
}

func TestRelay_ReconnectsWhenTheReplicationConnectionDrops(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	b.startRelay(t, cfg)

	const n = 600
	half := make(chan struct{})
	written := writeEvents(t, b, n, half)
	<-half
	for i := 0; i < 2; i++ {
		b.exec(t, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active`, b.slot)
		b.waitStreaming(t, cfg)
	}
	<-written
	checkDelivered(t, b, n)
}
