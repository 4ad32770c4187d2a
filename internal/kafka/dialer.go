package kafka

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/IBM/sarama"
)

// dialer connects to the cluster: one metadata client, made on the first
// connection that succeeds and kept, and a producer per connection (a new
// one after each outage).
type dialer struct {
	cfg Config
	sc  *sarama.Config
	// netDial opens the producers' connections; nil: a net.Dialer with
	// the configured timeout. Tests put a switch here to cut the cluster
	// off from the producers.
	netDial func(network, addr string) (net.Conn, error)

	mu     sync.Mutex
	client sarama.Client // nil until the cluster was first reached
	// skipped is why the last connection left some seed brokers out (they
	// did not answer as Kafka), or nil.
	skipped error
}

// Skipped is why the last connection left some --kafka-brokers addresses
// out, or nil when it used them all.
func (d *dialer) Skipped() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.skipped
}

// refusal is a connection error that waiting cannot fix (see refused): the
// configuration or the credentials.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// producer connects a new producer, behind a fence of its own (fence.go),
// and the metadata client first if there is none yet. Only the publisher's recovery (or Open) calls it, one call
// at a time. An error that waiting cannot fix is a refusal. Every seed
// broker is probed first (probe.go) and sarama is given only those that
// answered as Kafka: sarama must never read a non-Kafka answer.
func (d *dialer) producer(ctx context.Context) (sarama.AsyncProducer, error) {
	seeds, err := d.probe(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	connected := d.client != nil
	d.mu.Unlock()
	if !connected {
		client, err := sarama.NewClient(seeds, d.sc)
		if err != nil {
			return nil, d.explain(err)
		}
		d.mu.Lock()
		d.client = client
		d.mu.Unlock()
	}
	f := newFence(d.netDial)
	if f.dial == nil {
		nd := &net.Dialer{Timeout: d.sc.Net.DialTimeout, KeepAlive: d.sc.Net.KeepAlive}
		f.dial = nd.Dial
	}
	sc := *d.sc // the producer's own copy, whose connections go through its fence
	sc.Net.Proxy.Enable = true
	sc.Net.Proxy.Dialer = f
	sc.Producer.Retry.BackoffFunc = f.backoff(sc.Producer.Retry.Backoff)
	sc.Metadata.Retry.BackoffFunc = f.backoff(sc.Metadata.Retry.Backoff)
	producer, err := sarama.NewAsyncProducer(seeds, &sc)
	if err != nil {
		return nil, d.explain(err)
	}
	return &fencedProducer{AsyncProducer: producer, fence: f}, nil
}

// probe probes the seed brokers at once and returns those that answered as
// Kafka. With none, it returns a refusal if any answer proves a setting
// wrong, or else every broker's error.
func (d *dialer) probe(ctx context.Context) ([]string, error) {
	errs := make([]error, len(d.cfg.Brokers))
	var wg sync.WaitGroup
	for i, addr := range d.cfg.Brokers {
		wg.Go(func() { errs[i] = probe(ctx, addr, d.cfg, d.sc) })
	}
	wg.Wait()
	var seeds []string
	var skipped []error
	for i, err := range errs {
		switch {
		case isRefusal(err):
			return nil, err // a setting is wrong: no broker can work
		case err == nil:
			seeds = append(seeds, d.cfg.Brokers[i])
		default:
			skipped = append(skipped, err)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.Join(errs...)
	}
	d.mu.Lock()
	d.skipped = errors.Join(skipped...)
	d.mu.Unlock()
	return seeds, nil
}

// explain turns an error waiting cannot fix into a refusal.
func (d *dialer) explain(err error) error {
	if rerr := refused(err, d.cfg, d.sc); rerr != nil {
		return refusal{rerr}
	}
	return err
}

// partitions looks a topic's partitions up through the metadata client.
// Before the cluster was first reached it answers ErrNotConnected, which
// says "unavailable", not "bad topic".
func (d *dialer) partitions(topic string) ([]int32, error) {
	d.mu.Lock()
	client := d.client
	d.mu.Unlock()
	if client == nil {
		return nil, sarama.ErrNotConnected
	}
	return client.Partitions(topic)
}

// close closes the metadata client, if there is one.
func (d *dialer) close() error {
	d.mu.Lock()
	client := d.client
	d.client = nil
	d.mu.Unlock()
	if client == nil {
		return nil
	}
	return client.Close()
}

// IsRefusal reports whether err is Kafka refusing the relay's settings
// (TLS, SASL, credentials): a setup mistake that waiting cannot fix.
func IsRefusal(err error) bool { return isRefusal(err) }

// isRefusal reports whether err is one that waiting cannot fix.
func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}
