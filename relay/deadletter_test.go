package relay_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// deadLetterConfig is a relay publishing failures on topic dlt, which the
// allowlist (--topics) does not name, with quick rounds.
func (b *testBundle) deadLetterConfig(t *testing.T, dlt string) relay.Config {
	cfg := b.config(t)
	cfg.Kafka.DeadLetterTopic = dlt
	cfg.Kafka.Topics = []string{"orders", "later"}
	cfg.Metrics = metrics.New("test")
	cfg.Poll.Interval = 100 * time.Millisecond
	cfg.Poll.StuckThreshold = 2 * time.Second
	return cfg
}

// endOffset is how many records topic's partition 0 holds.
func endOffset(t *testing.T, b *testBundle, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(newKgo(t, b.brokers)).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

// failing inserts an event for topic later, which does not exist: FAILED
// INVALID_TOPIC.
func failing(t *testing.T, b *testBundle, key string) string {
	t.Helper()
	var id string
	if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload, headers, event_type)
		VALUES ('later', $1, '{"n": 1}', '{"app": "shop"}', 'order.created') RETURNING id::text`, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// deadLetterStatus polls until id's dead_letter_status is want.
func (b *testBundle) waitDeadLetter(t *testing.T, id, want string) {
	t.Helper()
	pgtest.Eventually(t, 30*time.Second, "dead_letter_status "+want, func() (bool, string) {
		var got *string
		_ = b.pool.QueryRow(context.Background(), `SELECT dead_letter_status FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&got)
		if got == nil {
			return false, "none"
		}
		return *got == want, *got
	})
}

// A FAILED event lands on the dead-letter topic once, with its key, value,
// headers and the failure's; a second failure lands too and the first is
// not published again; a resend delivers the event to its own topic, and
// the status row, not the dead letter, is the truth.
func TestDeadLetters_AFailedEventLandsOnceWithItsFailureAndAResendStillDelivers(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "dlt"))
	cfg := b.deadLetterConfig(t, "dlt")
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)
	id := failing(t, b, "k1")
	b.waitDeadLetter(t, id, "SENT")

	r := kafkatest.Consume(t, b.brokers, 1, 10*time.Second, "dlt")[0]
	var lastErr string
	var attempts int
	var failedAt time.Time
	if err := b.pool.QueryRow(context.Background(), `SELECT last_error, attempts, updated_at FROM outbox.deliveries
		WHERE event_id = $1`, id).Scan(&lastErr, &attempts, &failedAt); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "shop", "outbox-event-id": id, "outbox-event-type": "order.created",
		relay.HeaderDLTTopic: "later", relay.HeaderDLTReason: "INVALID_TOPIC", relay.HeaderDLTAttempts: strconv.Itoa(attempts),
		relay.HeaderDLTLastError: lastErr, relay.HeaderDLTFailedAt: failedAt.UTC().Format(time.RFC3339Nano),
		relay.HeaderConnectTopic: "later", relay.HeaderConnectError: lastErr}
	for k, v := range want {
		if got, _ := header(r, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(r.Key) != "k1" || string(r.Value) != `{"n": 1}` || lastErr == "" {
		t.Errorf("dead letter key %q value %q (last error %q)", r.Key, r.Value, lastErr)
	}

	second := failing(t, b, "k2")
	b.waitDeadLetter(t, second, "SENT")
	if n := endOffset(t, b, "dlt"); n != 2 {
		t.Errorf("%d dead letters after two failures, want 2: one was published again", n)
	}
	// "later" was never sent to (it does not exist): no label value of its
	// own. Counts of a label first seen wait for a scrape showing it at 0.
	pgtest.Eventually(t, 10*time.Second, "two dead letters counted", func() (bool, string) {
		got := scrape(t, srv)[`outbox_relay_events_dead_lettered_total{outcome="sent",topic="(refused)"}`]
		return got == 2, fmt.Sprintf("outbox_relay_events_dead_lettered_total{topic=(refused),outcome=sent} = %v, want 2", got)
	})

	// The topic is created; a resend delivers the first event where it
	// was meant to go. A skip of the second publishes nothing again.
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 1, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `SELECT outbox.resend($1::uuid)`, id)
	b.exec(t, `SELECT outbox.skip($1::uuid)`, second)
	if rec := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "later")[0]; string(rec.Key) != "k1" {
		t.Errorf("resent: key %q", rec.Key)
	}
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	if n := endOffset(t, b, "dlt"); n != 2 {
		t.Errorf("%d dead letters after the resend and the skip, want still 2", n)
	}
}

// A dead-letter topic that refuses the record (it does not exist) is said
// on the row, and the stream goes on.
func TestDeadLetters_ATopicThatRefusesIsSaidOnTheRow(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.startRelay(t, b.deadLetterConfig(t, "no-such-dlt"))
	id := failing(t, b, "k1")
	b.waitDeadLetter(t, id, "FAILED")
	var dlErr string
	if err := b.pool.QueryRow(context.Background(), `SELECT dead_letter_error FROM outbox.failed_events WHERE event_id = $1`, id).
		Scan(&dlErr); err != nil || !strings.Contains(dlErr, "INVALID_TOPIC") {
		t.Errorf("dead_letter_error %q (%v), want INVALID_TOPIC", dlErr, err)
	}
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{}')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)
}

// A relay that stops (as after a crash) between an event's FAILED row and
// its dead letter leaves it to the next relay, which publishes it once.
func TestDeadLetters_AFailureTheRelayDidNotPublishBeforeItStoppedIsPublishedOnceAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "dlt"))
	cfg := b.deadLetterConfig(t, "dlt")
	// The dead-letter topic fails every produce: Kafka unavailable for it.
	fault := b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "dlt", Err: kerr.NotEnoughReplicas, Count: -1})
	stop := b.startRelay(t, cfg)
	id := failing(t, b, "k1")
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fault.Wait(ctx, 1); err != nil {
		t.Fatalf("no dead letter tried: %v", err)
	}
	_ = stop() //nolint:errcheck // what it returns does not matter here
	var status *string
	_ = b.pool.QueryRow(context.Background(), `SELECT dead_letter_status FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&status)
	if status != nil {
		t.Fatalf("dead_letter_status %s before any dead letter was published", *status)
	}
	fault.Remove()

	b.startRelay(t, cfg) // the next relay, once the first one's lease has ended
	b.waitDeadLetter(t, id, "SENT")
	if n := endOffset(t, b, "dlt"); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
	recs := kafkatest.Consume(t, b.brokers, 1, 10*time.Second, "dlt")
	if got, _ := header(recs[0], relay.HeaderDLTReason); got != "INVALID_TOPIC" {
		t.Errorf("reason header %q", got)
	}
}
