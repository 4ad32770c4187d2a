package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// seqOf reads the "seq" a test wrote into an event's payload.
func seqOf(r *kgo.Record) int {
	var p struct{ Seq int }
	_ = json.Unmarshal(r.Value, &p)
	return p.Seq
}

// checkKeyOrder asserts that, per key, the first copy of each event came
// in increasing seq order, and returns how many distinct events there were.
func checkKeyOrder(t *testing.T, recs []*kgo.Record) int {
	t.Helper()
	seen := map[int]bool{}
	last := map[string]int{}
	for _, r := range recs {
		s := seqOf(r)
		if seen[s] {
			continue // a duplicate: at-least-once
		}
		seen[s] = true
		if prev, ok := last[string(r.Key)]; ok && s < prev {
			t.Fatalf("key %s: seq %d after %d: per-key order broken", r.Key, s, prev)
		}
		last[string(r.Key)] = s
	}
	return len(seen)
}

// onKafkaInOrder checks that the n events are on topic orders, each key in
// order, and returns how many records carried them (duplicates included).
func (b *testBundle) onKafkaInOrder(t *testing.T, n int) int {
	t.Helper()
	recs := kafkatest.Consume(t, b.brokers, n, 30*time.Second, "orders")
	if got := checkKeyOrder(t, recs); got != n {
		t.Fatalf("%d distinct events on Kafka, want %d", got, n)
	}
	return len(recs)
}

// setTopicMaxBytes sets the topic's max.message.bytes: a fault on big
// messages (MESSAGE_TOO_LARGE) that an operator can remove.
func setTopicMaxBytes(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	adm := kadm.NewClient(newKgo(t, brokers))
	v := fmt.Sprint(n)
	res, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, topic)
	if err == nil {
		for _, r := range res {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("setting max.message.bytes of %s: %v", topic, err)
	}
}

func TestHold_AFailedEventHoldsItsKeyUntilResentOrSkippedWhileOtherKeysFlow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm := kadm.NewClient(newKgo(t, b.brokers))
	small := "2000"
	if _, err := adm.CreateTopics(context.Background(), 3, 1, map[string]*string{"max.message.bytes": &small}, "orders"); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	cfg := b.config(t)
	cfg.FailedKeyPolicy = relay.FailedKeyHold
	cfg.Poll.Interval = 50 * time.Millisecond
	b.startRelay(t, cfg)
	big := `"` + strings.Repeat("x", 5000) + `"`
	insert := func(key string, seq int, pad string) string {
		var id string
		err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
			VALUES ('orders', $1, jsonb_build_object('seq', $2::int, 'pad', $3::jsonb)) RETURNING id::text`,
			key, seq, pad).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	blocking := insert("held", 0, big)
	if r := b.waitFor(t, blocking, "FAILED"); r.reason != relay.ReasonMessageTooLarge {
		t.Fatalf("blocking event: %+v, want FAILED MESSAGE_TOO_LARGE", r)
	}
	for i := 1; i <= 100; i++ { // 100 events of the held key, each in its own transaction, among other keys'
		insert("held", i, `""`)
		insert(fmt.Sprintf("other-%d", i%10), 1000+i, `""`)
	}
	b.waitStatus(t, "SENT", 100, 30*time.Second)
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
		WHERE e.key = 'held' AND d.status = 'PENDING' AND d.attempts = 0`); n != 100 {
		t.Fatalf("%d events of the held key queued PENDING with no attempt, want 100; %s", n, b.statusCounts(t))
	}
	var lat []float64
	rows, err := b.pool.Query(context.Background(), `SELECT extract(epoch FROM d.sent_at - e.created_at) * 1000
		FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id WHERE e.key LIKE 'other-%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ms float64
		_ = rows.Scan(&ms)
		lat = append(lat, ms)
	}
	slices.Sort(lat)
	t.Logf("FIGURES hold: other keys' commit-to-SENT while one key is held: p50 %.1f ms, p95 %.1f ms, max %.1f ms (%d events)",
		lat[len(lat)/2], lat[len(lat)*95/100], lat[len(lat)-1], len(lat))

	var topic, key, status, reason string
	var queued int
	err = b.pool.QueryRow(context.Background(), `SELECT topic, key, status, failure_reason, queued FROM outbox.held_keys
		WHERE blocking_event_id = $1`, blocking).Scan(&topic, &key, &status, &reason, &queued)
	if err != nil || key != "held" || status != "FAILED" || reason != relay.ReasonMessageTooLarge || queued != 100 {
		t.Fatalf("outbox.held_keys: %s/%s %s %s queued %d, %v; want orders/held FAILED MESSAGE_TOO_LARGE queued 100",
			topic, key, status, reason, queued, err)
	}

	// Remove the fault and resend: the 101 go out in commit order.
	setTopicMaxBytes(t, b.brokers, "orders", 1<<20)
	b.exec(t, `SELECT outbox.resend($1)`, blocking)
	b.waitStatus(t, "SENT", 201, 30*time.Second)
	recs := kafkatest.Consume(t, b.brokers, 201, 30*time.Second, "orders")
	if n := checkKeyOrder(t, recs); n != 201 {
		t.Fatalf("%d distinct events on Kafka, want 201", n)
	}
	var heldSeqs []int
	for _, r := range recs {
		if string(r.Key) == "held" {
			heldSeqs = append(heldSeqs, seqOf(r))
		}
	}
	if len(heldSeqs) < 101 || heldSeqs[0] != 0 || heldSeqs[100] != 100 {
		t.Fatalf("held key on Kafka: %d records starting %v, want the resent event first then 1..100", len(heldSeqs), heldSeqs[:min(3, len(heldSeqs))])
	}

	// Fail again, queue 5 behind it, skip it: the 5 go out, it never does.
	setTopicMaxBytes(t, b.brokers, "orders", 2000)
	skipped := insert("held", 200, big)
	b.waitFor(t, skipped, "FAILED")
	for i := 201; i <= 205; i++ {
		insert("held", i, `""`)
	}
	pgtest.Eventually(t, 10*time.Second, "5 queued behind the second failure", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT coalesce(sum(queued), 0)::int FROM outbox.held_keys WHERE blocking_event_id = $1`, skipped)
		return n == 5, fmt.Sprintf("%d queued", n)
	})
	var ok bool
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.skip($1)`, skipped).Scan(&ok); err != nil || !ok {
		t.Fatalf("outbox.skip = %v, %v; want true", ok, err)
	}
	b.waitStatus(t, "SENT", 206, 30*time.Second)
	if r := b.delivery(t, skipped); r.status != "SKIPPED" {
		t.Fatalf("skipped event: %+v, want SKIPPED", r)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.held_keys`); n != 0 {
		t.Fatalf("%d held keys after the skip, want 0", n)
	}
}

func TestHold_TwoPollersNeverDeliverAKeyOutOfOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm := kadm.NewClient(newKgo(t, b.brokers))
	if _, err := adm.CreateTopics(context.Background(), 3, 1, nil, "orders"); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	// 2,000 queued events over 20 keys, as a spill leaves them: PENDING,
	// due, in commit order. Commit order here is seq, the reverse of the
	// order the rows are inserted in, so nothing but commit_lsn orders them.
	const n = 2000
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || (s % 20), jsonb_build_object('seq', s) FROM generate_series($1::int, 1, -1) s`, n)
	b.exec(t, `INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, topic, key, commit_lsn, tx_position)
		SELECT id, 'PENDING', 0, now(), topic, key, '0/0'::pg_lsn + (payload->>'seq')::int * 100, 0 FROM outbox.events`)
	for i := range 2 {
		cfg := b.config(t)
		cfg.Mode = relay.ModePoll
		cfg.Poll.BatchSize = 7 + 6*i // different batch sizes: the two claim across each other
		cfg.Poll.Interval = 10 * time.Millisecond
		cfg.Poll.InstanceID = fmt.Sprintf("poller-%d", i)
		b.run(t, cfg)
	}
	b.waitStatus(t, "SENT", n, 60*time.Second)
	byInstance := pgtest.Count(t, b.pool, `SELECT count(DISTINCT key) FROM outbox.events`)
	recs := kafkatest.Consume(t, b.brokers, n, 30*time.Second, "orders")
	if got := checkKeyOrder(t, recs); got != n {
		t.Fatalf("%d distinct events on Kafka, want %d", got, n)
	}
	t.Logf("2 pollers delivered %d events of %d keys in commit order per key (%d records)", n, byInstance, len(recs))
}
