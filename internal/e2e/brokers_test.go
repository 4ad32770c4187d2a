package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// notKafkaRSSBound is the peak resident memory of a relay whose
// --kafka-brokers answers HTTP: what it reads of a non-Kafka answer is
// bounded (64 KiB a probe), so it stays near its idle size. sarama alone
// allocated the 1.2 GB that "HTTP" reads as, on every attempt.
const notKafkaRSSBound = 50 << 20

func TestWrongBroker_AnHTTPListenerIsNamedAndMemoryStaysBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	web := kafkatest.NewImpostor(t, kafkatest.HTTPAnswer, false)
	e.brokers = web.Addr
	p := e.startRelay(t)
	p.waitLog(t, web.Addr+" is not a Kafka listener: it answered HTTP", 10*time.Second)
	// Memory is measured across several attempts, each a new connection.
	pgtest.Eventually(t, 30*time.Second, "five attempts to connect", func() (bool, string) {
		return web.Conns() >= 5, fmt.Sprintf("%d connections", web.Conns())
	})
	rss := p.peakRSS(t)
	report(t, "relay peak RSS %.1f MiB after %d attempts on an HTTP listener (bound %d MiB)",
		float64(rss)/(1<<20), web.Conns(), notKafkaRSSBound>>20)
	if rss > notKafkaRSSBound {
		t.Errorf("relay peak RSS %.1f MiB exceeds the %d MiB bound", float64(rss)/(1<<20), notKafkaRSSBound>>20)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("relay exited with %d after SIGTERM, want 0", code)
	}
}

// SIGTERM is obeyed within --shutdown-timeout plus a second, whatever the
// broker address does with the relay's connections.
func TestWrongBroker_SIGTERMIsObeyedWithinTheShutdownTimeout(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 2 * time.Second
	cases := []struct {
		name string
		addr func(t *testing.T) (addr string, connected func() bool)
	}{
		{"ConnectHangs", func(t *testing.T) (string, func() bool) {
			return kafkatest.Blackhole(t), func() bool { return true }
		}},
		{"AcceptsAndNeverAnswers", func(t *testing.T) (string, func() bool) {
			i := kafkatest.NewImpostor(t, nil, true)
			return i.Addr, func() bool { return i.Conns() > 0 }
		}},
		{"AcceptsThenCloses", func(t *testing.T) (string, func() bool) {
			i := kafkatest.NewImpostor(t, nil, false)
			return i.Addr, func() bool { return i.Conns() > 2 }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "orders")
			addr, connected := tc.addr(t)
			e.brokers = addr
			// Connects and answers are waited for far longer than the stop may take.
			p := e.startRelay(t, "--shutdown-timeout", shutdownTimeout.String(),
				"--kafka-dial-timeout", "1m", "--kafka-request-timeout", "1m")
			p.waitLog(t, "starting outbox-relay", 10*time.Second)
			pgtest.Eventually(t, 10*time.Second, "the relay connecting", func() (bool, string) { return connected(), "" })
			if code := p.stopsWithin(t, shutdownTimeout, ""); code != 0 {
				t.Errorf("exit %d after SIGTERM, want 0 (a stop, even during the start)", code)
			}
		})
	}
}

// SIGTERM is obeyed within --shutdown-timeout plus a second while every
// connection to PostgreSQL hangs, events in flight included.
func TestStop_SIGTERMIsObeyedWhilePostgresIsFrozen(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 2 * time.Second
	e := newEnv(t, "orders")
	proxy, proxied := pgtest.NewProxy(t, e.dbURL)
	e.dbURL = proxied
	p := e.relay(t, "--shutdown-timeout", shutdownTimeout.String())
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || s, '{}' FROM generate_series(1, 100) s`); err != nil {
		t.Fatal(err)
	}
	if n := proxy.Freeze(); n == 0 {
		t.Fatal("no connection to freeze")
	}
	p.stopsWithin(t, shutdownTimeout, " with postgres frozen")
}

// stopsWithin sends SIGTERM and fails the test unless the process exits
// within shutdownTimeout (its --shutdown-timeout) plus a second; it returns
// the exit code.
func (p *proc) stopsWithin(t *testing.T, shutdownTimeout time.Duration, while string) int {
	t.Helper()
	start := time.Now()
	p.signal(t, syscall.SIGTERM)
	code := p.wait(t, time.Minute)
	took := time.Since(start)
	report(t, "stopped %s after SIGTERM%s (--shutdown-timeout %s), exit %d", took.Round(time.Millisecond), while, shutdownTimeout, code)
	if took > shutdownTimeout+time.Second {
		t.Errorf("took %s to obey SIGTERM; want at most --shutdown-timeout (%s) plus a second", took, shutdownTimeout)
	}
	return code
}
