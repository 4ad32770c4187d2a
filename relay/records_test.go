package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// A created_at that a Kafka record cannot carry (before 1970, after 9999,
// infinite, or past the 292 years a time.Duration holds) makes its event
// FAILED INVALID_EVENT at once, 0 attempts, last_error naming the column
// and the value, wherever it stands in its transaction; its neighbours are
// SENT with their own times, the two ends of the range included. Each
// failure's dead letter is published once, with the failure's time.
func TestTimestamps_AnEventWhoseTimeKafkaCannotCarryIsInvalidAtOnceWhateverItsNeighbours(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "dlt"))
	cfg := b.deadLetterConfig(t, "dlt")
	b.startRelay(t, cfg)

	bad := map[string]string{ // created_at: what last_error must hold
		"1969-07-20 20:17:40+00":    "1969-07-20 20:17:40Z",
		"10000-01-01 00:00:00+00":   "10000-01-01 00:00:00Z",
		"294000-01-01 00:00:00+00":  "294000-01-01 00:00:00Z",
		"infinity":                  "infinity",
		"-infinity":                 "-infinity",
		"4713-01-01 00:00:00+00 BC": "-4712-01-01 00:00:00Z",
	}
	good := []string{"1970-01-01 00:00:00+00", "2262-04-11 23:47:16.854+00", "2026-11-27 10:00:00+00"}
	// One transaction: bad values first, sixth and last among good ones.
	var order []string
	for range 3 {
		order = append(order, good...)
	}
	k := 0
	for at := range bad {
		switch k % 3 {
		case 0:
			order = append([]string{at}, order...)
		case 1:
			order = append(order[:5], append([]string{at}, order[5:]...)...)
		default:
			order = append(order, at)
		}
		k++
	}
	var values []string
	for n, at := range order {
		values = append(values, fmt.Sprintf("('orders', 'k%d', '{\"n\": %d}', 'e', '%s'::timestamptz)", n, n, at))
	}
	rows, err := b.pool.Query(context.Background(), `INSERT INTO outbox.events (topic, key, payload, event_type, created_at) VALUES `+
		strings.Join(values, ", ")+` RETURNING id::text, created_at::text, isfinite(created_at) AND created_at >= '1970-01-01+00' AND created_at < '2262-04-11 23:47:16.855+00'`)
	if err != nil {
		t.Fatal(err)
	}
	var ids, texts []string
	var valid []bool
	for rows.Next() {
		var id, text string
		var ok bool
		if err := rows.Scan(&id, &text, &ok); err != nil {
			t.Fatal(err)
		}
		ids, texts, valid = append(ids, id), append(texts, text), append(valid, ok)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	nGood := 0
	for k, id := range ids {
		if valid[k] {
			nGood++
			continue
		}
		r := b.waitFor(t, id, "FAILED")
		if r.reason != "INVALID_EVENT" || r.attempts != 0 || !strings.Contains(r.lastError, "created_at") {
			t.Errorf("created_at %s: %+v, want FAILED INVALID_EVENT after 0 attempts naming created_at", texts[k], r)
		}
		want := bad[order[k]]
		if !strings.Contains(r.lastError, want) {
			t.Errorf("created_at %s: last_error %q does not name the value %q", texts[k], r.lastError, want)
		}
	}
	b.waitStatus(t, "SENT", nGood, 30*time.Second)
	for _, r := range kafkatest.Consume(t, b.brokers, nGood, 30*time.Second, "orders") {
		id, _ := header(r, "outbox-event-id")
		var created time.Time
		if err := b.pool.QueryRow(context.Background(), `SELECT created_at FROM outbox.events WHERE id = $1`, id).Scan(&created); err != nil {
			t.Fatal(err)
		}
		if !r.Timestamp.Equal(created.Truncate(time.Millisecond)) {
			t.Errorf("event %s: Kafka timestamp %v, want its created_at %v", id, r.Timestamp.UTC(), created.UTC())
		}
	}
	// Each dead letter once (SENT, not retried for ever), at the failure's time.
	for k, id := range ids {
		if !valid[k] {
			b.waitDeadLetter(t, id, "SENT")
		}
	}
	letters := kafkatest.Consume(t, b.brokers, len(bad), 30*time.Second, "dlt")
	for _, r := range letters {
		id, _ := header(r, "outbox-event-id")
		var failedAt time.Time
		if err := b.pool.QueryRow(context.Background(), `SELECT updated_at FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&failedAt); err != nil {
			t.Fatal(err)
		}
		if d := r.Timestamp.Sub(failedAt); d < -time.Second || d > time.Second {
			t.Errorf("dead letter of %s: timestamp %v, want the failure's %v", id, r.Timestamp.UTC(), failedAt.UTC())
		}
	}
	if end := endOffset(t, b, "dlt"); end != int64(len(bad)) {
		t.Errorf("the dead-letter topic holds %d records, want one per failure (%d)", end, len(bad))
	}
}

// An INVALID_EVENT whose time is valid (bad headers) is dead-lettered with
// the event's time, as every other reason is, not the failure's.
func TestDeadLetters_AnInvalidEventsLetterCarriesTheEventsTime(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "dlt"))
	cfg := b.deadLetterConfig(t, "dlt")
	b.startRelay(t, cfg)
	var id string
	var created time.Time
	if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload, headers, created_at)
		VALUES ('orders', 'k', '{}', '{"n": 1}', '2020-02-02 02:02:02+00') RETURNING id::text, created_at`).Scan(&id, &created); err != nil {
		t.Fatal(err)
	}
	if r := b.waitFor(t, id, "FAILED"); r.reason != "INVALID_EVENT" {
		t.Fatalf("headers not of strings: %+v, want INVALID_EVENT", r)
	}
	b.waitDeadLetter(t, id, "SENT")
	r := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "dlt")[0]
	if !r.Timestamp.Equal(created) {
		t.Errorf("the dead letter's timestamp %v, want the event's created_at %v", r.Timestamp.UTC(), created.UTC())
	}
}

// At the edges, every record the relay writes in either mode is valid for
// the CloudEvents Go SDK, or its event is FAILED INVALID_EVENT naming the
// attribute: an empty id, control characters in the type or an
// extension; an empty subject is left out; text goes in data as a JSON
// string; a NULL payload stays a tombstone the SDK still reads.
func TestCloudEvents_EveryRecordIsValidForTheSDKOrItsEventIsInvalid(t *testing.T) {
	t.Parallel()
	for _, mode := range []cloudevents.Mode{cloudevents.Binary, cloudevents.Structured} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(1, "orders", "notes"))
			b.exec(t, `ALTER TABLE outbox.events ALTER payload DROP NOT NULL`)
			b.exec(t, `CREATE TABLE public.notes (id text PRIMARY KEY, tenant text, doc text, body text, kind text)`)
			tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.notes", "id": "id",
				"payload": "body", "event_type": "kind", "topic": "notes", "key": "doc",
				"cloudevents": {"subject": "doc", "extensions": {"tenant": "tenant"}}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			cfg := b.config(t)
			cfg.Tables = b.mapped(t, tables)
			cfg.CloudEvents = cloudevents.Config{Mode: mode}
			b.startRelay(t, cfg)
			b.exec(t, `INSERT INTO public.notes (id, tenant, doc, body, kind) VALUES
				('', 'acme', 'd', 'x', 'note.added'),
				('n-newline', 'acme', 'd', 'x', E'note\nadded'),
				('n-escape', E'acme\x1b[2J', 'd', 'x', 'note.added'),
				('n-empty-subject', 'acme', '', 'plain text', 'note.added')`)
			b.exec(t, `INSERT INTO outbox.events (topic, key, payload, event_type) VALUES ('orders', 'k', NULL, 'order.deleted')`)

			want := map[string]string{"": "non-empty id", "n-newline": "attribute type", "n-escape": "attribute tenant"}
			b.waitStatus(t, "FAILED", len(want), 30*time.Second)
			rows, err := b.pool.Query(context.Background(), `SELECT c.source_id, d.failure_reason, d.last_error, d.attempts
				FROM outbox.deliveries d JOIN outbox.mapped_events c ON c.id = d.event_id WHERE d.status = 'FAILED'`)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for rows.Next() {
				var rid, reason, lastErr string
				var attempts int
				if err := rows.Scan(&rid, &reason, &lastErr, &attempts); err != nil {
					t.Fatal(err)
				}
				got[rid] = lastErr
				if reason != "INVALID_EVENT" || attempts != 0 || !strings.Contains(lastErr, want[rid]) {
					t.Errorf("record %q: %s %q after %d attempts, want INVALID_EVENT naming %q", rid, reason, lastErr, attempts, want[rid])
				}
			}
			if len(got) != len(want) {
				t.Errorf("FAILED records %v, want %v", got, want)
			}
			// The empty id's status row is where outbox.event_id finds it.
			if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries
				WHERE event_id = outbox.event_id('public.notes', '') AND status = 'FAILED'`); n != 1 {
				t.Errorf("the FAILED row of id '' is not at outbox.event_id('public.notes', ''): %d rows there", n)
			}

			n := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "notes")[0]
			ev := kafkatest.CloudEvent(t, n)
			if ev.Subject() != "" || ev.ID() != "n-empty-subject" || string(ev.Data()) != "plain text" {
				t.Errorf("an empty subject: %s", ev)
			}
			if mode == cloudevents.Structured {
				var doc map[string]any
				if err := json.Unmarshal(n.Value, &doc); err != nil || doc["data"] != "plain text" {
					t.Errorf("text in structured mode: %s, want \"data\": \"plain text\"", n.Value)
				}
				if _, ok := doc["subject"]; ok {
					t.Errorf("an empty subject is written: %s", n.Value)
				}
			}
			o := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders")[0]
			if o.Value != nil {
				t.Errorf("a NULL payload in %s mode: value %q, want a tombstone (null)", mode, o.Value)
			}
			if tev := kafkatest.CloudEvent(t, o); tev.Type() != "order.deleted" || tev.Data() != nil {
				t.Errorf("the tombstone's CloudEvent: %s", tev)
			}
		})
	}
}
