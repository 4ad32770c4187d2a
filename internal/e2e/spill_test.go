package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func TestSpill_SIGKILLDuringASpillLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // the broker keeps its data across a restart
	e := newEnv(t, "orders:3", "--data-dir", dir)

	relayProc := e.relay(t, "--spill-after", "1s", "--poll-interval", "50ms")
	stop := make(chan struct{})
	written := writer(t, e, stop, 40000)
	time.Sleep(500 * time.Millisecond) // some traffic delivered directly first: nothing to wait on but the clock

	e.kafka.signal(t, syscall.SIGKILL)
	e.kafka.wait(t, 10*time.Second)
	relayProc.waitLog(t, "spilling", 15*time.Second)
	// Events written during the spill, delivered in the end like the rest.
	const duringSpill = 2000
	for i := 0; i < duringSpill/100; i++ {
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (s % 50), jsonb_build_object('spilled', s) FROM generate_series(1, 100) s`); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Eventually(t, 60*time.Second, "events spilled", func() (bool, string) {
		n := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'`)
		return n >= 100, fmt.Sprintf("%d PENDING rows", n)
	})
	relayProc.signal(t, syscall.SIGKILL)
	relayProc.wait(t, 10*time.Second)
	spilled := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'`)

	kafkaOn(t, e.kafkaPort, "orders:3", "--data-dir", dir)
	e.relay(t, "--spill-after", "1s", "--poll-interval", "50ms")
	time.Sleep(time.Second) // traffic goes on after the restart: nothing to wait on but the clock
	close(stop)
	total := <-written + duringSpill
	dups := deliveredOnce(t, e, total)
	if n := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE attempts <> 1`); n != 0 {
		t.Fatalf("%d rows delivered after other than exactly one attempt: the outage burned attempts", n)
	}
	report(t, "%d events, relay SIGKILLed during a spill with %d events queued: 0 lost, %d duplicates on Kafka",
		total, spilled, dups)
}
