package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// writer inserts events in transactions of 1 to 100 rows until stop is
// closed or max events are written, and returns how many it committed.
func writer(t *testing.T, e *env, stop <-chan struct{}, max int) <-chan int {
	return transactions(t, e, stop, max, 100, func(n int) string {
		return fmt.Sprintf(`INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (s %% 50), jsonb_build_object('s', s, 'pad', repeat('x', 200))
			FROM generate_series(1, %d) AS s`, n)
	})
}

// transactions commits statement(n) for n of 1 to most, drawn from a
// fixed seed, 2 ms apart, until stop is closed or max events are written,
// and returns how many events it committed.
func transactions(t *testing.T, e *env, stop <-chan struct{}, max, most int, statement func(n int) string) <-chan int {
	out := make(chan int, 1)
	var written atomic.Int64
	go func() {
		defer func() { out <- int(written.Load()) }()
		rng := rand.New(rand.NewPCG(1, 2))
		for int(written.Load()) < max {
			select {
			case <-stop:
				return
			default:
			}
			n := 1 + rng.IntN(most)
			if _, err := e.pool.Exec(context.Background(), statement(n)); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			written.Add(int64(n))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return out
}

// deliveredOnce checks every event is on Kafka and has a SENT row, and
// returns how many duplicates Kafka holds.
func deliveredOnce(t *testing.T, e *env, total int) int {
	t.Helper()
	if got := e.count(t, `SELECT count(*) FROM outbox.events`); got != total {
		t.Fatalf("outbox.events has %d rows, writer committed %d", got, total)
	}
	pgtest.Eventually(t, 120*time.Second, "every event SENT", func() (bool, string) {
		n := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		return n == total, fmt.Sprintf("%d of %d SENT", n, total)
	})
	if n := e.count(t, `SELECT count(*) FROM outbox.events ev WHERE NOT EXISTS
		(SELECT 1 FROM outbox.deliveries d WHERE d.event_id = ev.id AND d.status = 'SENT')`); n != 0 {
		t.Fatalf("%d events have no SENT row", n)
	}
	recs := kafkatest.Consume(t, []string{e.brokers}, total, 60*time.Second, "orders")
	seen := map[string]int{}
	for _, r := range recs {
		for _, h := range r.Headers {
			if h.Key == kafka.HeaderEventID {
				seen[string(h.Value)]++
			}
		}
	}
	rows, err := e.pool.Query(context.Background(), `SELECT id::text FROM outbox.events`)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		if seen[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d events are not on Kafka", missing, total)
	}
	return len(recs) - len(seen)
}

func TestCrash_SIGKILLWhileWritingLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:3")
	stop := make(chan struct{})
	const maxEvents = 20000
	// A kill duplicates what was in flight: events Kafka had, without their
	// status row yet. The writer outpaces each restart, so the new relay
	// catches up on a backlog with its window full: a smaller window than
	// the default makes the bound below one the test can tell.
	const maxInFlight = 2000
	window := []string{"--max-in-flight", fmt.Sprint(maxInFlight)}
	relayProc := e.relay(t, window...)
	written := writer(t, e, stop, maxEvents)

	const kills = 4
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		relayProc.signal(t, syscall.SIGKILL)
		relayProc.wait(t, 10*time.Second)
		relayProc = e.relay(t, window...)
	}
	close(stop)
	total := <-written
	dups := deliveredOnce(t, e, total)
	report(t, "%d events, relay SIGKILLed %d times while writing (--max-in-flight %d): 0 lost, %d duplicates on Kafka",
		total, kills, maxInFlight, dups)
	if dups > kills*maxInFlight {
		t.Fatalf("%d duplicates after %d kills; each kill may duplicate at most --max-in-flight (%d) events",
			dups, kills, maxInFlight)
	}
}

func TestGracefulRestart_SIGTERMLeavesZeroDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:3")
	stop := make(chan struct{})
	relayProc := e.relay(t)
	written := writer(t, e, stop, 20000)

	for i := 0; i < 3; i++ {
		time.Sleep(500 * time.Millisecond)
		relayProc.signal(t, syscall.SIGTERM)
		if code := relayProc.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("relay exited with %d after SIGTERM, want 0", code)
		}
		relayProc = e.relay(t)
	}
	close(stop)
	total := <-written
	dups := deliveredOnce(t, e, total)
	report(t, "%d events, relay stopped with SIGTERM 3 times while writing: %d duplicates", total, dups)
	if dups != 0 {
		t.Fatalf("%d duplicates after graceful restarts, want 0", dups)
	}
}

func TestSecondSignal_ExitsAtOnceWhileTheDrainWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:1")
	relayProc := e.relay(t, "--shutdown-timeout", "5m")
	// With the broker gone, the event cannot be delivered, so the graceful
	// drain after the first signal waits...
	e.kafka.signal(t, syscall.SIGKILL)
	e.kafka.wait(t, 10*time.Second)
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO outbox.events (topic, payload) VALUES ('orders', '{}')`); err != nil {
		t.Fatal(err)
	}
	relayProc.waitLog(t, "circuit breaker open", 10*time.Second)
	relayProc.signal(t, syscall.SIGTERM)
	// Signals of one kind sent back to back can merge into one: send the
	// second once the first was seen, as an operator's second Ctrl-C would be.
	relayProc.waitLog(t, "signal received", 10*time.Second)
	relayProc.signal(t, syscall.SIGTERM)
	// ...and the second signal does not wait for it.
	if code := relayProc.wait(t, 10*time.Second); code != 130 {
		t.Fatalf("relay exited with %d after a second signal, want 130", code)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox.deliveries`); n != 0 {
		t.Fatalf("%d status rows written for an event Kafka never had", n)
	}
}
