package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/retry"
)

// cutoff stands between the producers and the cluster: Down resets every
// connection open and refuses new ones, as a broker that went away; Up lets
// them through again.
type cutoff struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (c *cutoff) dial(network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	conn, err := net.DialTimeout(network, addr, time.Second)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutoff) Down() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as from a host that is gone
		}
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutoff) Up() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// openBehind opens a publisher on the cluster at brokers whose producers
// connect through cut, as Open does; each time the breaker opens, opened
// gets a signal.
func openBehind(t *testing.T, brokers []string, cut *cutoff, opened chan<- struct{}) *Publisher {
	t.Helper()
	cfg := Config{Brokers: brokers, RequestTimeout: 2 * time.Second, DialTimeout: time.Second}
	sc, err := cfg.Sarama()
	if err != nil {
		t.Fatal(err)
	}
	d := &dialer{cfg: cfg.withDefaults(), sc: sc, netDial: cut.dial}
	producer, err := d.producer(context.Background())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	p := newPublisher(producer, d.producer, d.partitions, retry.Reconnect(10*time.Millisecond, 100*time.Millisecond),
		zaptest.NewLogger(t))
	p.dial = d
	p.OnTransition(func(s BreakerState) {
		if s == BreakerOpen {
			select {
			case opened <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// orderedOutcomes counts outcomes and remembers those that are not Sent.
type orderedOutcomes struct {
	mu      sync.Mutex
	done    int
	notSent []string
	changed chan struct{}
}

func (o *orderedOutcomes) Done(m *Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done++
	if m.Outcome.Result != Sent {
		o.notSent = append(o.notSent, fmt.Sprintf("%s: %+v", value(m), m.Outcome))
	}
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

func (o *orderedOutcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

// waitCount waits until n outcomes came back.
func (o *orderedOutcomes) waitCount(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for o.count() < n {
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("%d outcomes within %s, want %d", o.count(), within, n)
		}
	}
}

// waitAvailable waits until pub's breaker is closed with nothing to resend.
func waitAvailable(t *testing.T, pub *Publisher) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !pub.Available() {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker is %s 30s after the cluster came back", pub.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A short outage while events flow: sarama gives up on an early batch of a
// partition and, with its epoch bumped, goes on delivering the later ones
// when the cluster is back, unless the producer that saw the outage is
// fenced off. Each round cuts the cluster off, lets it back the moment the
// breaker opens (the old producer still retrying), and the records on the
// topic must be, per key, in the order Publish was given them.
func TestPublisher_KeepsKeyOrderAcrossShortOutagesWhileTheOldProducerStillRetries(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.Cluster(t, kfake.SeedTopics(1, "orders"))
	cut := &cutoff{}
	opened := make(chan struct{}, 1)
	pub := openBehind(t, cluster.ListenAddrs(), cut, opened)
	out := &orderedOutcomes{changed: make(chan struct{}, 1)}

	const keys, rounds = 4, 8
	ctx, stop := context.WithCancel(context.Background())
	var published sync.WaitGroup
	var n int // messages handed over, read once published is done
	published.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			m := &Message{}
			if err := m.Build(Event{Topic: "orders", Key: []byte("k" + strconv.Itoa(i%keys)),
				Value: []byte(strconv.Itoa(i))}); err != nil {
				t.Error(err)
				return
			}
			if err := pub.Publish(ctx, []*Message{m}, out); err != nil {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Publish: %v", err)
				}
				return
			}
			n = i + 1
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // a steady flow, not one huge batch
			}
		}
	})
	for r := 0; r < rounds; r++ {
		out.waitCount(t, out.count()+200, 20*time.Second) // flowing again
		cut.Down()
		select {
		case <-opened:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the breaker did not open within 20s of the cut", r)
		}
		cut.Up() // at once: the old producer still holds later batches
		waitAvailable(t, pub)
	}
	out.waitCount(t, out.count()+200, 20*time.Second)
	stop()
	published.Wait()
	out.waitCount(t, n, 30*time.Second)
	if len(out.notSent) > 0 {
		t.Fatalf("%d messages not Sent, first: %s", len(out.notSent), out.notSent[0])
	}

	records := kafkatest.Consume(t, cluster.ListenAddrs(), n, 20*time.Second, "orders")
	last := map[string]int{} // per key, the highest value seen first
	seen := map[int]bool{}   // values already on the topic
	var overtaken []string   // first copies behind a later one of their key
	for _, r := range records {
		v, _ := strconv.Atoi(string(r.Value))
		if seen[v] {
			continue // a duplicate: allowed
		}
		seen[v] = true
		k := string(r.Key)
		if prev, ok := last[k]; ok && v < prev {
			overtaken = append(overtaken, fmt.Sprintf("key %s: %d at offset %d after %d", k, v, r.Offset, prev))
		}
		last[k] = max(last[k], v)
	}
	if len(seen) != n {
		t.Errorf("%d distinct messages on the topic, want %d", len(seen), n)
	}
	if len(overtaken) > 0 {
		t.Fatalf("%d messages overtaken on the topic in %d outages, first: %v", len(overtaken), rounds,
			overtaken[:min(5, len(overtaken))])
	}
	t.Logf("%d messages, %d records (%d duplicates), %d outages, in order per key", n, len(records),
		len(records)-n, rounds)
}
