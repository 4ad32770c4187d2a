package relay_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
)

// Both modes of the binding, read by sdk-go: every required attribute, the
// time from the event, JSON data as JSON, text data, a mapped table's
// subject and extension, and an event without a type FAILED with a reason
// that says how to fix it.
func TestCloudEvents_BothModesAreReadBySDKGoWithEveryAttribute(t *testing.T) {
	t.Parallel()
	for _, mode := range []cloudevents.Mode{cloudevents.Binary, cloudevents.Structured} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(1, "orders", "notes"))
			b.exec(t, `CREATE TABLE public.notes (id bigint PRIMARY KEY, tenant text, doc text, body text, kind text,
				at timestamptz NOT NULL DEFAULT now(), tp text)`)
			tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.notes", "id": "id",
				"payload": "body", "event_type": "kind", "timestamp": "at", "topic": "notes", "trace_context": "tp",
				"cloudevents": {"subject": "doc", "extensions": {"tenant": "tenant"}}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			cfg := b.config(t)
			cfg.Tables = b.mapped(t, tables)
			cfg.CloudEvents = cloudevents.Config{Mode: mode}
			b.startRelay(t, cfg)

			ctx := context.Background()
			var id, db string
			var created time.Time
			if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload, event_type, headers)
				VALUES ('orders', 'k1', '{"n": 1}', 'order.created', '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}')
				RETURNING id::text, created_at, current_database()`).Scan(&id, &created, &db); err != nil {
				t.Fatal(err)
			}
			var untyped string
			if err := b.pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, payload) VALUES ('orders', '{}') RETURNING id::text`).
				Scan(&untyped); err != nil {
				t.Fatal(err)
			}
			b.exec(t, `INSERT INTO public.notes (id, tenant, doc, body, kind, tp) VALUES (7, 'acme', 'doc-1', 'plain text', 'note.added',
				'00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01')`)

			r := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "orders")[0]
			ev := kafkatest.CloudEvent(t, r)
			if ev.SpecVersion() != "1.0" || ev.ID() != id || ev.Source() != "/"+db+"/outbox.events" ||
				ev.Type() != "order.created" || !ev.Time().Equal(created) || ev.DataContentType() != "application/json" {
				t.Errorf("outbox.events' CloudEvent: %s", ev)
			}
			var data map[string]int
			if err := json.Unmarshal(ev.Data(), &data); err != nil || data["n"] != 1 {
				t.Errorf("data %q, want the payload {\"n\": 1}", ev.Data())
			}
			if tp, _ := header(r, "traceparent"); tp != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
				t.Errorf("traceparent %q: the event's trace context did not arrive", tp)
			}
			if mode == cloudevents.Binary && string(r.Value) != `{"n": 1}` {
				t.Errorf("binary mode changed the value: %s", r.Value)
			}

			nr := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "notes")[0]
			if tp, _ := header(nr, "traceparent"); tp != "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" {
				t.Errorf("the mapped table's trace_context column: traceparent %q", tp)
			}
			n := kafkatest.CloudEvent(t, nr)
			if n.ID() != "7" || n.Source() != "/"+db+"/public.notes" || n.Type() != "note.added" || n.Subject() != "doc-1" ||
				n.Extensions()["tenant"] != "acme" || string(n.Data()) != "plain text" ||
				!strings.HasPrefix(n.DataContentType(), "text/plain") {
				t.Errorf("the mapped table's CloudEvent: %s (data %q)", n, n.Data())
			}

			b.waitStatus(t, "FAILED", 1, 30*time.Second)
			var reason, lastErr string
			if err := b.pool.QueryRow(ctx, `SELECT failure_reason, last_error FROM outbox.deliveries WHERE event_id = $1`, untyped).
				Scan(&reason, &lastErr); err != nil || reason != "INVALID_EVENT" || !strings.Contains(lastErr, "--cloudevents-default-type") {
				t.Errorf("an event without a type: %s %q (%v), want INVALID_EVENT naming --cloudevents-default-type", reason, lastErr, err)
			}
		})
	}
}

// A kept record (a mapped event that waited) is written again as the same
// CloudEvent: its subject and extension kept, no ce_ header twice.
func TestCloudEvents_AMappedEventResentFromItsKeptRecordIsTheSameEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "notes"))
	b.exec(t, `CREATE TABLE public.notes (id bigint PRIMARY KEY, tenant text, doc text, body jsonb, kind text)`)
	tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.notes", "id": "id",
		"payload": "body", "event_type": "kind", "topic": "${kind}",
		"cloudevents": {"subject": "doc", "extensions": {"tenant": "tenant"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, tables)
	cfg.CloudEvents = cloudevents.Config{Mode: cloudevents.Binary}
	b.startRelay(t, cfg)
	// A topic that does not exist: FAILED, its record kept; then created
	// and resent by the poller from the kept record.
	b.exec(t, `INSERT INTO public.notes VALUES (1, 'acme', 'doc-1', '{"a": 1}', 'later')`)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 1, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `SELECT outbox.resend_failed()`)
	r := kafkatest.Consume(t, b.brokers, 1, 30*time.Second, "later")[0]
	ev := kafkatest.CloudEvent(t, r)
	if ev.ID() != "1" || ev.Subject() != "doc-1" || ev.Extensions()["tenant"] != "acme" || ev.Type() != "later" {
		t.Errorf("resent from the kept record: %s", ev)
	}
	seen := map[string]int{}
	for _, h := range r.Headers {
		seen[h.Key]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("header %s %d times: %v", k, n, r.Headers)
		}
	}
}

// With --debezium-opentelemetry, Debezium's tracing.span.context.field (by
// default tracingspancontext, where the table has it) holds the span
// context as Java properties: its traceparent and tracestate reach Kafka as
// the W3C headers. (Without it, as Debezium without OpenTelemetry, no trace
// header is written: the conformance corpus's p48.)
func TestTraceContext_DebeziumsSpanContextColumnBecomesTheW3CHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "outbox.event.order"))
	b.exec(t, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
		type text NOT NULL, payload jsonb, tracingspancontext text)`)
	d, err := mapping.ParseDebezium("c.json", map[string]string{
		"connector.class":                          "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list":                       "public.outboxevent",
		"transforms":                               "outbox",
		"transforms.outbox.type":                   mapping.EventRouter,
		"transforms.outbox.tracing.operation.name": "outbox-read",
	})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	d.PropagateTraceContext() // --debezium-opentelemetry: as a worker with OpenTelemetry
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, d.Tables)
	b.startRelay(t, cfg)
	// What Debezium's ActivateTracingSpan reads: java.util.Properties text.
	b.exec(t, `INSERT INTO public.outboxevent VALUES ('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e2f1', 'order', 'o-1', 'created',
		'{"n": 1}', E'#Thu Nov 26 10:00:00 UTC 2026\ntraceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ntracestate=vendor\\=x,other\\=y\n')`)
	b.exec(t, `INSERT INTO public.outboxevent VALUES ('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e2f2', 'order', 'o-1', 'created',
		'{"n": 2}', NULL)`)
	recs := kafkatest.Consume(t, b.brokers, 2, 30*time.Second, "outbox.event.order")
	tp, _ := header(recs[0], "traceparent")
	ts, _ := header(recs[0], "tracestate")
	if tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || ts != "vendor=x,other=y" {
		t.Errorf("traceparent %q, tracestate %q: want the span context's", tp, ts)
	}
	if _, ok := header(recs[1], "traceparent"); ok {
		t.Errorf("an event without a span context has a traceparent: %v", recs[1].Headers)
	}
}
