package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// A relay SIGKILLed after an event's FAILED row and before its dead
// letter reached Kafka (the broker was down) leaves it to the next relay,
// which publishes it once.
func TestDeadLetter_SIGKILLBetweenTheFailureAndItsDeadLetterPublishesItOnceAfter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // the broker keeps its topics across a restart
	e := newEnv(t, "orders:1,dlt:1", "--data-dir", dir)
	args := []string{"--dead-letter-topic", "dlt", "--topics", "orders", "--stuck-threshold", "2s", "--poll-interval", "50ms"}
	relayProc := e.relay(t, args...)

	e.kafka.signal(t, syscall.SIGKILL)
	e.kafka.wait(t, 10*time.Second)
	// Not allowed by --topics: FAILED at once, without Kafka.
	var id string
	if err := e.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
		VALUES ('forbidden', 'k1', '{"n": 1}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The relay has taken the failure for the dead-letter topic (its lease)
	// and waits for Kafka.
	pgtest.Eventually(t, 30*time.Second, "the failure taken for the dead-letter topic", func() (bool, string) {
		var status, lease string
		_ = e.pool.QueryRow(context.Background(), `SELECT status, coalesce(dead_letter_lease::text, '') FROM outbox.deliveries
			WHERE event_id = $1`, id).Scan(&status, &lease)
		return status == "FAILED" && lease != "", status + " lease " + lease
	})
	relayProc.signal(t, syscall.SIGKILL)
	relayProc.wait(t, 10*time.Second)
	if n := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE dead_letter_status IS NOT NULL`); n != 0 {
		t.Fatalf("%d rows say their dead letter went out while Kafka was down", n)
	}

	kafkaOn(t, e.kafkaPort, "orders:1,dlt:1", "--data-dir", dir)
	e.relay(t, args...)
	pgtest.Eventually(t, 30*time.Second, "the dead letter published", func() (bool, string) {
		n := e.count(t, fmt.Sprintf(`SELECT count(*) FROM outbox.deliveries WHERE event_id = '%s' AND dead_letter_status = 'SENT'`, id))
		return n == 1, fmt.Sprintf("%d", n)
	})
	rec := kafkatest.Consume(t, []string{e.brokers}, 1, 10*time.Second, "dlt")[0]
	if string(rec.Key) != "k1" || string(rec.Value) != `{"n": 1}` {
		t.Errorf("dead letter key %q value %q", rec.Key, rec.Value)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "dlt")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("dlt", 0); o.Offset != 1 {
		t.Errorf("%d dead letters on the topic, want 1", o.Offset)
	}
	report(t, "relay SIGKILLed between a FAILED row and its dead letter: published once after the restart")
}
