package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// failedRow is a FAILED event's row, by the event's topic.
type failedRow struct {
	reason, lastError string
	attempts          int
}

// failedByTopic reads the FAILED rows of outbox.events by their topic.
func (b *testBundle) failedByTopic(t *testing.T) map[string]failedRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT e.topic, d.failure_reason, d.last_error, d.attempts
		FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id WHERE d.status = 'FAILED'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]failedRow{}
	for rows.Next() {
		var topic string
		var f failedRow
		if err := rows.Scan(&topic, &f.reason, &f.lastError, &f.attempts); err != nil {
			t.Fatal(err)
		}
		out[topic] = f
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// insertTopics inserts one event for each topic, with key k and payload {}.
func (b *testBundle) insertTopics(t *testing.T, topics ...string) {
	t.Helper()
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT t, 'k', '{}' FROM unnest($1::text[]) AS t`, topics)
}

// Without --topics, a writer of outbox.events reaches no system topic of
// Kafka's ecosystem (Schema Registry's, Confluent's, Kafka Connect's), and
// a name Kafka forbids is refused before it is sent; neither counts an
// attempt, and the stream goes on.
func TestTopics_SystemTopicsAndNamesKafkaForbidsAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	system := []string{"_schemas", "_confluent-command", "_confluent-metrics", "connect-configs", "connect-offsets",
		"connect-status", "__consumer_offsets"}
	b := setup(t, kfake.SeedTopics(1, append([]string{"orders"}, system...)...))
	b.startRelay(t, b.config(t))
	forbidden := []string{"orders.*", "ｏｒｄｅｒｓ", strings.Repeat("a", 300), ".", "..", "orders/x", "orders\x01"}
	b.insertTopics(t, append(append([]string{"orders"}, system...), forbidden...)...)
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	b.waitStatus(t, "FAILED", len(system)+len(forbidden), 30*time.Second)

	failed := b.failedByTopic(t)
	for _, topic := range system {
		f := failed[topic]
		if f.reason != "TOPIC_NOT_ALLOWED" || f.attempts != 0 || !strings.Contains(f.lastError, "only when --topics names it exactly") {
			t.Errorf("system topic %s: %+v, want FAILED TOPIC_NOT_ALLOWED after 0 attempts, saying --topics must name it", topic, f)
		}
		if n := endOffset(t, b, topic); n != 0 {
			t.Errorf("%d records reached system topic %s", n, topic)
		}
	}
	for _, topic := range forbidden {
		f := failed[topic]
		if f.reason != relay.ReasonInvalidTopic || f.attempts != 0 || !strings.Contains(f.lastError, "a Kafka topic name is 1 to 249") {
			t.Errorf("topic %.40q: %+v, want FAILED INVALID_TOPIC after 0 attempts, saying what Kafka allows", topic, f)
		}
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'`); n != 0 {
		t.Errorf("%d events left PENDING for a retry, want none", n)
	}
}

// Named exactly, a system topic is published to.
func TestTopics_ASystemTopicNamedExactlyIsPublishedTo(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "_schemas", "connect-status"))
	cfg := b.config(t)
	cfg.Kafka.Topics = []string{"_schemas", "connect-*"}
	b.startRelay(t, cfg)
	b.insertTopics(t, "_schemas", "connect-status")
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	if f := b.failedByTopic(t)["connect-status"]; f.reason != "TOPIC_NOT_ALLOWED" {
		t.Errorf("connect-status matched by a pattern only: %+v, want TOPIC_NOT_ALLOWED", f)
	}
}

// The dead-letter topic takes the relay's dead letters only: an event
// addressed to it is refused unless --topics names it, and no event can
// carry the headers a dead letter carries, so no writer can forge one for
// a redrive tool to publish to the topic it names.
func TestDeadLetters_AWriterCannotForgeADeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "orders.dlq", "payments"))
	cfg := b.deadLetterConfig(t, "orders.dlq")
	cfg.Kafka.Topics = []string{"orders"}
	b.startRelay(t, cfg)

	forged := []string{relay.HeaderDLTTopic, relay.HeaderDLTReason, relay.HeaderConnectTopic, "outbox-dlt-anything",
		"__connect.errors.exception.class.name", "OUTBOX-DLT-REASON", "outbox-event-source"}
	ids := map[string]string{} // header -> event id
	for _, h := range forged {
		var id string
		if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload, headers)
			VALUES ('orders', 'k', '{}', jsonb_build_object($1::text, 'payments')) RETURNING id::text`, h).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[h] = id
	}
	var plain string
	if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload, headers)
		VALUES ('orders.dlq', 'k', '{}', '{"app": "shop"}') RETURNING id::text`).Scan(&plain); err != nil {
		t.Fatal(err)
	}

	for h, id := range ids {
		r := b.waitFor(t, id, "FAILED")
		if r.reason != relay.ReasonInvalidEvent || r.attempts != 0 || !strings.Contains(r.lastError, fmt.Sprintf("%q is reserved for the relay", h)) {
			t.Errorf("an event with header %s: %+v, want FAILED INVALID_EVENT naming the header", h, r)
		}
	}
	r := b.waitFor(t, plain, "FAILED")
	if r.reason != "TOPIC_NOT_ALLOWED" || r.attempts != 0 || !strings.Contains(r.lastError, "dead-letter topic") {
		t.Errorf("an event addressed to the dead-letter topic: %+v, want FAILED TOPIC_NOT_ALLOWED saying it is the dead-letter topic", r)
	}
	// Each failure still lands on the dead-letter topic as a dead letter,
	// with one copy of each dead-letter header: the relay's.
	b.waitDeadLetter(t, plain, "SENT")
	for _, id := range ids {
		b.waitDeadLetter(t, id, "SENT")
	}
	recs := kafkatest.Consume(t, b.brokers, len(ids)+1, 10*time.Second, "orders.dlq")
	for _, rec := range recs {
		n := 0
		for _, h := range rec.Headers {
			if strings.EqualFold(h.Key, relay.HeaderDLTTopic) {
				n++
			}
		}
		if topic, _ := header(rec, relay.HeaderDLTTopic); n != 1 || topic == "payments" {
			t.Errorf("a dead letter has %d %s headers, the first %q: want one, the relay's", n, relay.HeaderDLTTopic, topic)
		}
	}
	if n := endOffset(t, b, "payments"); n != 0 {
		t.Errorf("%d records on payments", n)
	}
}

// A user header named like one the relay writes is refused (INVALID_EVENT
// naming it), not sent as a second copy before the relay's: outbox-event-*,
// outbox-dlt-*, __connect.errors.* always, and in CloudEvents mode ce_* and
// content-type, which plain records leave to the user.
func TestHeaders_ANameTheRelayWritesIsRefused(t *testing.T) {
	t.Parallel()
	always := []string{"outbox-event-id", "outbox-event-type", "Outbox-Event-Id", "outbox-event-x", "outbox-dlt-reason",
		"__connect.errors.topic"}
	cloud := []string{"ce_id", "ce_type", "ce_source", "ce_specversion", "ce_subject", "CE_ID", "content-type", "Content-Type"}
	for _, mode := range []cloudevents.Mode{cloudevents.Off, cloudevents.Binary, cloudevents.Structured} {
		t.Run(fmt.Sprintf("CloudEvents%q", mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(1, "orders"))
			cfg := b.config(t)
			cfg.CloudEvents = cloudevents.Config{Mode: mode, DefaultType: "order.created"}
			if mode == cloudevents.Off {
				cfg.CloudEvents.DefaultType = ""
			}
			b.startRelay(t, cfg)
			refused := always
			if mode != cloudevents.Off {
				refused = append(append([]string{}, always...), cloud...)
			}
			ids := map[string]string{}
			for _, h := range append(append([]string{}, always...), cloud...) {
				var id string
				if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload, headers)
					VALUES ('orders', 'k', '{}', jsonb_build_object($1::text, 'forged')) RETURNING id::text`, h).Scan(&id); err != nil {
					t.Fatal(err)
				}
				ids[h] = id
			}
			total := len(always) + len(cloud)
			b.waitStatus(t, "FAILED", len(refused), 30*time.Second)
			b.waitStatus(t, "SENT", total-len(refused), 30*time.Second)
			for _, h := range refused {
				r := b.delivery(t, ids[h])
				if r.status != "FAILED" || r.reason != relay.ReasonInvalidEvent || r.attempts != 0 ||
					!strings.Contains(r.lastError, fmt.Sprintf("%q is reserved for the relay", h)) {
					t.Errorf("header %s: %+v, want FAILED INVALID_EVENT naming it", h, r)
				}
			}
			// Plain records: ce_* and content-type are the user's, sent once.
			recs := kafkatest.Consume(t, b.brokers, total-len(refused), 10*time.Second, "orders")
			for _, rec := range recs {
				seen := map[string]int{}
				for _, h := range rec.Headers {
					seen[strings.ToLower(h.Key)]++
				}
				for k, n := range seen {
					if n > 1 {
						t.Errorf("record with %d headers named %s", n, k)
					}
				}
			}
		})
	}
}

// Mapped tables route events to topics from their rows: the same rules
// apply, and their headers column is held to the same reserved names. A
// mapping that places a header by a reserved name does not start.
func TestMapped_TopicRulesAndReservedHeadersApply(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "_schemas", "outbox.event.order"))
	b.exec(t, `CREATE TABLE public.events (id text PRIMARY KEY, topic text NOT NULL, payload jsonb, headers jsonb)`)
	b.exec(t, debeziumTable)
	own, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.events", "id": "id", "payload": "payload",
		"headers": "headers", "topic": "${topic}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := mapping.LoadDebezium("../internal/mapping/testdata/outbox-connector.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, append(own, d.Tables...))
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO public.events VALUES ('sent', 'orders', '{}', NULL), ('system', '_schemas', '{}', NULL),
		('forbidden', 'orders.*', '{}', NULL), ('forged', 'orders', '{}', '{"outbox-dlt-reason": "x"}')`)
	b.exec(t, `INSERT INTO public.outboxevent VALUES
		('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e201', 'order', 'o-1', 'OrderCreated', '{}'),
		('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202', 'order*', 'o-1', 'OrderCreated', '{}')`)
	b.waitStatus(t, "SENT", 2, 30*time.Second)
	b.waitStatus(t, "FAILED", 4, 30*time.Second)

	want := map[string]struct {
		reason, says string
	}{
		"events:system":    {"TOPIC_NOT_ALLOWED", "only when --topics names it exactly"},
		"events:forbidden": {"INVALID_TOPIC", "a Kafka topic name is 1 to 249"},
		"events:forged":    {"INVALID_EVENT", `"outbox-dlt-reason" is reserved for the relay`},
		"outboxevent:6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202": {"INVALID_TOPIC", `"outbox.event.order*"`},
	}
	rows, err := b.pool.Query(context.Background(), `SELECT m.source, m.source_id, d.failure_reason, d.last_error, d.attempts
		FROM outbox.deliveries d JOIN outbox.mapped_events m ON m.id = d.event_id WHERE d.status = 'FAILED'`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var source, id, reason, lastErr string
		var attempts int
		err := r.Scan(&source, &id, &reason, &lastErr, &attempts)
		key := strings.TrimPrefix(source, "public.") + ":" + id
		w, ok := want[key]
		if !ok || reason != w.reason || attempts != 0 || !strings.Contains(lastErr, w.says) {
			t.Errorf("%s: FAILED %s after %d attempts (%s); want %s after 0 attempts, saying %s", key, reason, attempts, lastErr, w.reason, w.says)
		}
		return key, err
	})
	if err != nil || len(got) != len(want) {
		t.Errorf("FAILED mapped events %v (%v), want %d", got, err, len(want))
	}

	for _, c := range []struct {
		header string
		mode   cloudevents.Mode
	}{{"outbox-dlt-reason", cloudevents.Off}, {"outbox-event-id", cloudevents.Off}, {"ce_id", cloudevents.Binary}} {
		tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.events", "id": "id", "payload": "payload",
			"topic": "orders", "header_columns": [{"column": "topic", "header": "`+c.header+`"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		bad := b.config(t)
		bad.Tables, bad.CloudEvents = tables, cloudevents.Config{Mode: c.mode, DefaultType: "t"}
		if c.mode == cloudevents.Off {
			bad.CloudEvents.DefaultType = ""
		}
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("places header %q is reserved", c.header)) {
			t.Errorf("a mapping placing header %s (CloudEvents %q): %v, want an error naming it", c.header, c.mode, err)
		}
	}
}
