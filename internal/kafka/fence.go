package kafka

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// errFenced is why a fenced producer's connections fail.
var errFenced = errors.New("kafka producer fenced off after an outage")

// fence is one producer's only way to the cluster, which the publisher
// shuts the moment that producer gives a message back as unavailable.
//
// Sarama, when a batch of a partition fails its last retry, bumps the
// idempotent producer's epoch and goes on with that partition's later
// batches: if the cluster is back by then, they land before the failed
// batch is resent, and a key's events are out of order (issue 48). Waiting
// for the producer to give everything back does not help: the later
// batches come back delivered. Shut, the fence resets every connection of
// the producer and opens no new one, so nothing the producer still holds
// can reach the cluster any more: it all comes back failed, and the next
// producer resends it in the original order. A request written before the
// fence shut may still have been appended; its resend is then a duplicate,
// behind it and so in order. One case is left: sarama may send a later
// batch in the moment between giving up on a batch and the publisher
// reading that error (microseconds), and if the cluster came back in
// exactly that moment, that batch lands ahead of the resend.
type fence struct {
	dial  func(network, addr string) (net.Conn, error)
	mu    sync.Mutex
	shut  bool
	conns map[*fencedConn]struct{}
}

func newFence(dial func(network, addr string) (net.Conn, error)) *fence {
	return &fence{dial: dial, conns: map[*fencedConn]struct{}{}}
}

// Dial opens a connection of the producer, unless the fence is shut.
func (f *fence) Dial(network, addr string) (net.Conn, error) {
	if f.isShut() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errFenced}
	}
	conn, err := f.dial(network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shut { // shut while dialing
		reset(conn)
		return nil, &net.OpError{Op: "dial", Net: network, Err: errFenced}
	}
	c := &fencedConn{Conn: conn, f: f}
	f.conns[c] = struct{}{}
	return c, nil
}

func (f *fence) isShut() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shut
}

// Shut resets every connection and refuses new ones, for good.
func (f *fence) Shut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shut = true
	for c := range f.conns {
		reset(c.Conn)
	}
	clear(f.conns)
}

// backoff is a sarama retry backoff of d, and none once the fence is shut:
// sarama fails what it holds one message at a time, each after a retry
// backoff, and a fenced producer's retries cannot succeed, so waiting
// would only hold the resend back.
func (f *fence) backoff(d time.Duration) func(retries, maxRetries int) time.Duration {
	return func(int, int) time.Duration {
		if f.isShut() {
			return 0
		}
		return d
	}
}

// reset closes conn at once, dropping what it has not sent yet (a TCP
// close would still send it).
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) //nolint:errcheck // closing anyway
	}
	_ = conn.Close() //nolint:errcheck // fenced
}

// fencedConn is a connection the fence keeps track of.
type fencedConn struct {
	net.Conn
	f *fence
}

func (c *fencedConn) Close() error {
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	return c.Conn.Close()
}

// fencedProducer is a producer with its fence.
type fencedProducer struct {
	sarama.AsyncProducer
	fence *fence
}

// shutFence shuts producer's fence, if it has one (test fakes do not).
func shutFence(producer sarama.AsyncProducer) {
	if fp, ok := producer.(*fencedProducer); ok {
		fp.fence.Shut()
	}
}
