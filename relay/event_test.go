package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

func TestRelay_BadRowsAreFailedAsInvalidEventAndTheRestIsDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.startRelay(t, b.config(t))

	b.exec(t, `
		INSERT INTO outbox.events (id, topic, key, payload, headers) VALUES
		  ('00000000-0000-0000-0000-000000000001', 'orders', 'k', '{"n":1}', NULL),
		  ('00000000-0000-0000-0000-000000000002', 'orders', 'k', '{"n":2}', '["not","an","object"]'),
		  ('00000000-0000-0000-0000-000000000003', 'orders', 'k', '{"n":3}', '{"retries": 3}'),
		  ('00000000-0000-0000-0000-000000000004', 'orders', 'k', '{"n":4}', '{"ok": "yes"}'),
		  ('00000000-0000-0000-0000-000000000005', '',       'k', '{"n":5}', NULL),
		  ('00000000-0000-0000-0000-000000000006', 'orders', 'k', '{"n":6}', '{"outbox-event-id": "spoof"}'),
		  ('00000000-0000-0000-0000-000000000007', 'orders', 'k', '{"n":7}', NULL)`)
	b.waitStatus(t, "SENT", 3, 30*time.Second)
	b.waitStatus(t, "FAILED", 4, 30*time.Second)

	want := map[string]string{
		"00000000-0000-0000-0000-000000000002": "headers must be a JSON object of string values: an array",
		"00000000-0000-0000-0000-000000000003": `headers: value of "retries" is a number, want a string`,
		"00000000-0000-0000-0000-000000000005": "topic is NULL or empty",
		"00000000-0000-0000-0000-000000000006": `headers: "outbox-event-id" is reserved for the relay, which writes the outbox-event-* headers`,
	}
	rows, err := b.pool.Query(context.Background(), `
		SELECT event_id::text, status, failure_reason, last_error, attempts FROM outbox.deliveries WHERE status = 'FAILED'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status, reason, lastErr string
		var attempts int
		if err := rows.Scan(&id, &status, &reason, &lastErr, &attempts); err != nil {
			t.Fatal(err)
		}
		if reason != relay.ReasonInvalidEvent {
			t.Errorf("event %s: failure_reason %q, want INVALID_EVENT", id, reason)
		}
		if lastErr != want[id] {
			t.Errorf("event %s: last_error %q, want %q", id, lastErr, want[id])
		}
		if attempts != 0 {
			t.Errorf("event %s: attempts %d, want 0 (never sent)", id, attempts)
		}
	}
	recs := kafkatest.Consume(t, b.brokers, 3, 10*time.Second, "orders")
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, " ") != `{"n": 1} {"n": 4} {"n": 7}` {
		t.Errorf("delivered %v, want n=1, 4 and 7 in order", got)
	}
}

func TestRelay_PublishesPayloadColumnTypesByteExact(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "raw"))
	b.startRelay(t, b.config(t))

	// The relay maps columns by name: reorder them by dropping and re-adding.
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE bytea USING convert_to(payload::text, 'UTF8')`)
	b.exec(t, `INSERT INTO outbox.events (topic, payload) VALUES ('raw', '\x00ff10'::bytea)`)
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE text USING encode(payload, 'escape')`)
	b.exec(t, `INSERT INTO outbox.events (topic, payload) VALUES ('raw', 'plain text, not JSON')`)
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE json USING '{}'::json`)
	b.exec(t, `INSERT INTO outbox.events (topic, payload) VALUES ('raw', '{"spaces" :  [1,2],  "dup": 1, "dup": 2}')`)
	b.exec(t, `ALTER TABLE outbox.events DROP COLUMN headers, ADD COLUMN headers jsonb`)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload, headers) VALUES ('raw', 'k', '{"k": true}', '{"moved": "yes"}')`)
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE int USING 1`)
	b.exec(t, `INSERT INTO outbox.events (id, topic, payload) VALUES ('00000000-0000-0000-0000-0000000000aa', 'raw', 42)`)
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE jsonb USING to_jsonb(payload)`)
	b.exec(t, `INSERT INTO outbox.events (topic, payload) VALUES ('raw', '{"b": 2, "a": 1}')`)

	b.waitStatus(t, "SENT", 5, 30*time.Second)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	recs := kafkatest.Consume(t, b.brokers, 5, 10*time.Second, "raw")
	want := [][]byte{
		{0x00, 0xff, 0x10},
		[]byte("plain text, not JSON"),
		[]byte(`{"spaces" :  [1,2],  "dup": 1, "dup": 2}`),
		[]byte(`{"k": true}`),
		[]byte(`{"a": 1, "b": 2}`),
	}
	if len(recs) != len(want) {
		t.Fatalf("read %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if !bytes.Equal(r.Value, want[i]) {
			t.Errorf("record %d: value %q, want %q", i, r.Value, want[i])
		}
	}
	if v, _ := header(recs[3], "moved"); v != "yes" {
		t.Errorf("headers column moved by DROP/ADD: header moved=%q, want yes", v)
	}
	var lastErr string
	if err := b.pool.QueryRow(context.Background(), `SELECT last_error FROM outbox.deliveries
		WHERE event_id = '00000000-0000-0000-0000-0000000000aa' AND failure_reason = 'INVALID_EVENT'`).Scan(&lastErr); err != nil {
		t.Fatalf("int payload not INVALID_EVENT: %v", err)
	}
	if !strings.Contains(lastErr, "payload has type integer") {
		t.Errorf("last_error %q does not name the payload's type", lastErr)
	}
}

// On PostgreSQL 18 the publication streams stored generated columns
// (migration 11), so headers computed from the payload reach Kafka from
// the stream as they do from SQL.
func TestRelay_AGeneratedColumnIsStreamedOnPostgreSQL18(t *testing.T) {
	t.Parallel()
	if major := pgtest.Major(t); major < 18 {
		t.Skipf("publish_generated_columns is PostgreSQL 18's; this is %d", major)
	}
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.exec(t, `ALTER TABLE outbox.events DROP COLUMN headers,
		ADD COLUMN headers jsonb GENERATED ALWAYS AS (payload -> 'meta') STORED`)
	b.startRelay(t, b.config(t))
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"meta": {"tenant": "acme"}}')`)
	recs := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders")
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	for _, h := range recs[0].Headers {
		if string(h.Key) == "tenant" && string(h.Value) == "acme" {
			return
		}
	}
	t.Fatalf("headers %v lack the generated tenant header", recs[0].Headers)
}

// Changing the payload column's type changes what the poller's prepared
// statements return; PostgreSQL then refuses their cached plans once. That
// is no outage: the poller prepares them again and says nothing.
func TestRelay_APayloadColumnTypeChangeIsNoPostgresOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "dlt"))
	cfg := b.deadLetterConfig(t, "dlt")
	cfg.Kafka.Topics = nil
	core, logs := observer.New(zap.InfoLevel)
	cfg.Logger = zap.New(zapcore.NewTee(core, cfg.Logger.Core()))
	b.startRelay(t, cfg)
	var id string
	if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload) VALUES ('later', 'k', '{"n": 1}')
		RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, id, "FAILED")
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 1, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `ALTER TABLE outbox.events ALTER payload TYPE text USING payload::text`)
	b.exec(t, `SELECT outbox.resend_failed()`)
	b.waitFor(t, id, "SENT") // the poller claimed and delivered it after the change
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "unavailable") || strings.Contains(fmt.Sprint(e.ContextMap()), "cached plan") {
			t.Errorf("logged after a column type change: %s %v", e.Message, e.ContextMap())
		}
	}
}
