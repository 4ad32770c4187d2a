package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// hostile is text that breaks whatever splices it: quotes of every kind, a
// statement, newlines, control characters (NUL-free: PostgreSQL text has
// none), a format verb, and non-ASCII.
const hostile = "x'); DROP TABLE outbox.deliveries; --\"`$1 %s\n\r\t\x01\x1b[31m\x7f é 🙂\\"

// Hostile input stays data: events whose every field is hostile are
// published byte-exact or FAILED with a clear reason, and nothing else
// changes; a mapped table whose schema, table and column names are hostile
// is relayed as any other.
func TestHostile_EveryFieldIsDataPublishedExactlyOrFailedWithAReason(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "mapped"))
	outboxTables := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'outbox'`)
	long := strings.Repeat(hostile, 2000) // about 100 kB
	b.exec(t, `CREATE SCHEMA "we'ird ""schema"""`)
	b.exec(t, `CREATE TABLE "we'ird ""schema"""."tab;le--
x" ("id; DROP" text PRIMARY KEY, "Key ""k""" text, "pay load" jsonb, "type'" text)`)
	tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "\"we'ird \"\"schema\"\"\".\"tab;le--\nx\"",
		"id": "id; DROP", "key": "Key \"k\"", "payload": "pay load", "event_type": "type'", "topic": "mapped"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, tables)
	core, logs := observer.New(zap.InfoLevel)
	cfg.Logger = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	b.startRelay(t, cfg)

	headers, _ := json.Marshal(map[string]string{hostile: long, "plain": hostile})
	payload, _ := json.Marshal(map[string]string{hostile: long})
	ctx := context.Background()
	var sentID, badTopicID string
	if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload, headers, event_type)
		VALUES ('orders', $1, $2, $3, $4) RETURNING id::text`, long, payload, headers, hostile).Scan(&sentID); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload) VALUES ($1, $2, '{}') RETURNING id::text`,
		hostile, hostile).Scan(&badTopicID); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO "we'ird ""schema"""."tab;le--
x" VALUES ($1, $2, $3, $4)`, hostile, long, payload, hostile)

	// outbox.events: byte-exact.
	recs := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders")
	if len(recs) != 1 {
		t.Fatalf("%d records on orders, want 1", len(recs))
	}
	var wantPayload string
	if err := b.pool.QueryRow(ctx, `SELECT payload::text FROM outbox.events WHERE id = $1`, sentID).Scan(&wantPayload); err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h.Key] = string(h.Value)
	}
	if string(r.Key) != long || string(r.Value) != wantPayload || got[hostile] != long || got["plain"] != hostile ||
		got[kafka.HeaderEventType] != hostile {
		t.Errorf("the record is not what was written: key equal %v, value equal %v, headers %d", string(r.Key) == long,
			string(r.Value) == wantPayload, len(r.Headers))
	}
	// A topic Kafka cannot have: FAILED, its reason clear.
	row := b.waitFor(t, badTopicID, "FAILED")
	if row.reason != relay.ReasonInvalidTopic || !strings.Contains(row.lastError, "topic") {
		t.Errorf("an impossible topic: %+v", row)
	}
	// The mapped table: its row by its hostile id, its record exact.
	m := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "mapped")
	if len(m) != 1 || string(m[0].Key) != long || !headerIs(m[0], kafka.HeaderEventType, hostile) {
		t.Fatalf("the mapped table's record: %d records", len(m))
	}
	// The record is on Kafka before its status row is written (status
	// writes follow the acknowledgement, batched): wait for the row.
	pgtest.Eventually(t, 30*time.Second, "the mapped event's SENT row by its hostile id", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE event_id = outbox.event_id($1, $2) AND status = 'SENT'`,
			tables[0].QualifiedName(), hostile)
		return n == 1, fmt.Sprintf("%d rows; %s", n, b.statusCounts(t))
	})

	// Logs carry it as a field (the encoder quotes it), never in a message.
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "DROP TABLE") {
			t.Errorf("hostile text in a log message: %q", e.Message)
		}
	}
	if len(logs.FilterField(zap.String("topic", hostile)).All()) == 0 {
		t.Error("the FAILED event's topic is not logged as a field")
	}

	// Nothing else changed: the outbox's tables, and exactly three status rows.
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'outbox'`); n != outboxTables {
		t.Errorf("%d tables in schema outbox, want the %d it had", n, outboxTables)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries`); n != 3 {
		t.Errorf("%d status rows, want 3: %s", n, b.statusCounts(t))
	}
}

func headerIs(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value) == value
		}
	}
	return false
}

// An event whose topic is kilobytes of text that does not compress (no
// index of outbox.events refuses it, those of outbox.deliveries would)
// fails as INVALID_TOPIC, its status row without the topic, and the stream
// goes on: its status row could not be written, which the relay took for
// PostgreSQL being unavailable, retrying without end.
func TestHostile_AnEventWithATopicTooLongToIndexFailsAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.startRelay(t, b.config(t))
	ctx := context.Background()
	var badID, topic string
	if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload)
		SELECT string_agg(md5(i::text), ''), 'k', '{}' FROM generate_series(1, 1000) i RETURNING id::text, topic`).Scan(&badID, &topic); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k2', '{}')`)
	if recs := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders"); len(recs) != 1 {
		t.Fatalf("%d records on orders after the long topic, want 1", len(recs))
	}
	if row := b.waitFor(t, badID, "FAILED"); row.reason != relay.ReasonInvalidTopic {
		t.Errorf("the event of a 32,000-byte topic: %+v, want INVALID_TOPIC", row)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
		WHERE d.event_id = $1 AND d.topic IS NULL AND e.topic = $2`, badID, topic); n != 1 {
		t.Errorf("its status row keeps the topic, or its event lost it")
	}
}

// An event whose key is as long as outbox.events takes (its key index
// holds 2,600 bytes of text that does not compress, the status row's index
// with a topic of 200 bytes and the order columns does not) and that
// fails: it fails,
// its status row without the key, and the stream goes on.
func TestHostile_AFailedEventWithAKeyTooLongForTheStatusIndexFailsAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.startRelay(t, b.config(t))
	ctx := context.Background()
	var badID, key string
	if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload)
		SELECT repeat('m', 200), string_agg(md5(i::text), ''), '{}' FROM generate_series(1, 82) i RETURNING id::text, key`).Scan(&badID, &key); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k2', '{}')`)
	if recs := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders"); len(recs) != 1 {
		t.Fatalf("%d records on orders after the long key, want 1", len(recs))
	}
	b.waitFor(t, badID, "FAILED")
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
		WHERE d.event_id = $1 AND d.key IS NULL AND e.key = $2`, badID, key); n != 1 {
		t.Errorf("its status row keeps the key, or its event lost it")
	}
}

// A writer of outbox.events can take the id of a mapped table's event
// (outbox.event_id: a version 8 UUID anyone can compute) ahead of it: the
// relay publishes the intruder and writes its status row under that id.
// Once the relay replayed the mapped event (written while it was stopped,
// or after a crash), it found that row and published nothing: the event
// was lost. A row of another source is not the event's own: it is
// published.
func TestHostile_AnEventWithAMappedEventsIDDoesNotStopThatEventsDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "elsewhere"))
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, mappedOrders(t, b))
	stop := b.startRelay(t, cfg)

	b.exec(t, `INSERT INTO outbox.events (id, topic, key, payload)
		VALUES (outbox.event_id('public.orders_outbox', '1'), 'elsewhere', 'k', '{}')`)
	b.waitStatus(t, "SENT", 1, 15*time.Second) // the intruder's status row, under the mapped event's id
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO public.orders_outbox (k, body) VALUES ('k1', '{"seq": 1}')`)
	b.startRelay(t, cfg) // replays it
	recs := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders")
	if len(recs) != 1 || string(recs[0].Value) != `{"seq": 1}` {
		t.Fatalf("records on orders: %d, want the mapped event", len(recs))
	}
}

// An event in outbox.events with a mapped event's id and an old
// created_at (a table owner's, or one written before the relay): retention
// deleted it and, with it, the mapped event's status row, SENT a moment
// ago, days before its time. Now retention leaves a
// mapped event's status row alone, and so does deleting an event.
func TestHostile_RetentionDoesNotTakeAMappedEventsStatusRowThroughAnEventWithItsID(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.exec(t, `INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, source, topic, created_at)
		VALUES (outbox.event_id('public.orders_outbox', '7'), 'SENT', 1, now(), 'public.orders_outbox', 'orders', now());
		INSERT INTO outbox.events (id, topic, key, payload, created_at)
		VALUES (outbox.event_id('public.orders_outbox', '7'), 'orders', 'k', '{}', now() - interval '10 days'),
		       ('00000000-0000-7000-8000-000000000001', 'orders', 'k', '{}', now() - interval '10 days');
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, created_at)
		VALUES ('00000000-0000-7000-8000-000000000001', 'SENT', 1, now(), now() - interval '10 days')`)
	cfg := b.config(t)
	cfg.Retention = 7 * 24 * time.Hour
	b.startRelay(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "the old SENT event deleted", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.events WHERE id = '00000000-0000-7000-8000-000000000001'`)
		return n == 0, fmt.Sprint(n)
	})
	mapped := `SELECT count(*) FROM outbox.deliveries WHERE event_id = outbox.event_id('public.orders_outbox', '7')`
	if n := pgtest.Count(t, b.pool, mapped); n != 1 {
		t.Fatalf("the mapped event's status row, SENT a moment ago: %d left, want 1", n)
	}
	b.exec(t, `DELETE FROM outbox.events WHERE id = outbox.event_id('public.orders_outbox', '7')`)
	if n := pgtest.Count(t, b.pool, mapped); n != 1 {
		t.Errorf("deleting the event with its id took the mapped event's status row")
	}
}

// A mapped event waiting for a retry is sent from its kept copy. With an
// event of outbox.events under its id, the poller's claim read that event
// instead, and sent the intruder's record as the mapped event's retry.
func TestHostile_AMappedEventsRetryIsItsCopyNotAnEventWithItsID(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, mappedOrders(t, b))
	b.exec(t, `INSERT INTO outbox.mapped_events (id, source, source_id, topic, key, value, created_at)
		VALUES (outbox.event_id('public.orders_outbox', '9'), 'public.orders_outbox', '9', 'orders', 'k9', convert_to('{"seq": 9}', 'UTF8'), now());
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, source, topic, key, commit_lsn, tx_position)
		VALUES (outbox.event_id('public.orders_outbox', '9'), 'PENDING', 1, now(), 'public.orders_outbox', 'orders', 'k9', '0/0', 0);
		INSERT INTO outbox.events (id, topic, key, payload)
		VALUES (outbox.event_id('public.orders_outbox', '9'), 'orders', 'k9', '"intruder"')`)
	b.startRelay(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "the mapped event SENT", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		return n == 1, fmt.Sprint(n)
	})
	recs := kafkatest.Consume(t, b.brokers, 1, 10*time.Second, "orders")
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if len(got) != 1 || got[0] != `{"seq": 9}` {
		t.Errorf("records on orders %q, want the mapped event's copy alone", got)
	}
}
