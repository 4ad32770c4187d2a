package relay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// debeziumTable is the outbox table of Debezium's documentation.
const debeziumTable = `CREATE TABLE public.outboxevent (
	id            uuid         PRIMARY KEY,
	aggregatetype varchar(255) NOT NULL,
	aggregateid   varchar(255) NOT NULL,
	type          varchar(255) NOT NULL,
	payload       jsonb
)`

// headerList lists r's headers but the relay's own and Debezium's
// __debezium.context.* (TestDebeziumConformance checks those).
func headerList(r *kgo.Record) string {
	var hs []string
	for _, h := range r.Headers {
		if h.Key != kafka.HeaderEventID && !strings.HasPrefix(h.Key, "__debezium.context.") {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
	}
	return strings.Join(hs, " ")
}

func TestMapped_ADebeziumTableIsRelayedWithItsConnectorConfigAsDebeziumWould(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "outbox.event.order"))
	b.exec(t, debeziumTable)
	d, err := mapping.LoadDebezium("../internal/mapping/testdata/outbox-connector.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, d.Tables)
	b.startRelay(t, cfg)

	// Debezium's recommended pattern: the row is deleted in the transaction
	// that wrote it. The second event's topic does not exist yet.
	b.exec(t, `BEGIN;
		INSERT INTO public.outboxevent VALUES
		  ('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e201', 'order', 'o-1', 'OrderCreated', '{"id": 1, "lines": [1, 2]}'),
		  ('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202', 'invoice', 'i-1', 'InvoiceIssued', '{"id": 2}'),
		  ('6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e203', 'order', 'o-1', 'OrderShipped', '{"id": 1, "shipped": true}');
		DELETE FROM public.outboxevent;
		COMMIT`)
	b.waitStatus(t, "SENT", 2, 30*time.Second)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)

	recs := kafkatest.Consume(t, b.brokers, 2, 10*time.Second, "outbox.event.order")
	want := []struct{ key, value, headers string }{
		{"o-1", `"{\"id\": 1, \"lines\": [1, 2]}"`, "id=6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e201 eventType=OrderCreated"},
		{"o-1", `"{\"id\": 1, \"shipped\": true}"`, "id=6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e203 eventType=OrderShipped"},
	}
	for i, r := range recs {
		if string(r.Key) != want[i].key || string(r.Value) != want[i].value || headerList(r) != want[i].headers {
			t.Errorf("record %d: key %q value %s headers %q\nwant key %q value %s headers %q",
				i, r.Key, r.Value, headerList(r), want[i].key, want[i].value, want[i].headers)
		}
	}

	// Status rows are keyed by outbox.event_id(table, id), which Go and
	// SQL compute alike.
	var sqlID string
	if err := b.pool.QueryRow(context.Background(),
		`SELECT outbox.event_id('public.outboxevent', '6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202')::text`).Scan(&sqlID); err != nil {
		t.Fatal(err)
	}
	goID := mapping.EventID("public.outboxevent", "6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202")
	if sqlID != string(kafka.FormatUUID(goID)) {
		t.Fatalf("outbox.event_id = %s, mapping.EventID = %s", sqlID, kafka.FormatUUID(goID))
	}
	var status, source, topic string
	if err := b.pool.QueryRow(context.Background(), `SELECT d.status, f.source, f.topic FROM outbox.failed_events f
		JOIN outbox.deliveries d ON d.event_id = f.event_id WHERE f.event_id = $1`, sqlID).
		Scan(&status, &source, &topic); err != nil {
		t.Fatalf("the failed event of the deleted row: %v", err)
	}
	if status != "FAILED" || source != "public.outboxevent" || topic != "outbox.event.invoice" {
		t.Errorf("failed event: %s %s %s", status, source, topic)
	}

	// Its row is gone, yet it is resent from SQL by the table's own id,
	// with the record the stream made of it.
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 1, 1, nil, "outbox.event.invoice"); err != nil {
		t.Fatal(err)
	}
	var resent bool
	if err := b.pool.QueryRow(context.Background(),
		`SELECT outbox.resend('public.outboxevent', '6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202')`).Scan(&resent); err != nil || !resent {
		t.Fatalf("resend = %v, %v", resent, err)
	}
	b.waitStatus(t, "SENT", 3, 30*time.Second)
	inv := kafkatest.Consume(t, b.brokers, 1, 10*time.Second, "outbox.event.invoice")
	if string(inv[0].Key) != "i-1" || string(inv[0].Value) != `"{\"id\": 2}"` ||
		headerList(inv[0]) != "id=6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e202 eventType=InvoiceIssued" {
		t.Errorf("resent record: key %q value %s headers %q", inv[0].Key, inv[0].Value, headerList(inv[0]))
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM public.outboxevent`); n != 0 {
		t.Errorf("the relay wrote %d rows to the application's table", n)
	}
}

func TestMapped_TablesWithBigintAndTextIDsShareOneRelay(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "billing.paid", "billing.refunded", "audit"))
	b.exec(t, `CREATE SCHEMA billing;
		CREATE TABLE billing.outbox (
			event_no  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			account   text NOT NULL,
			kind      text NOT NULL,
			tenant    text,
			body      bytea,
			extra     jsonb,
			at        timestamptz NOT NULL DEFAULT now());
		CREATE TABLE public.audit_log (ref text UNIQUE NOT NULL, who text, what text NOT NULL)`)
	file := filepath.Join(t.TempDir(), "tables.json")
	if err := os.WriteFile(file, []byte(`{"tables": [
		{"table": "billing.outbox", "id": "event_no", "key": "account", "payload": "body", "timestamp": "at",
		 "event_type": "kind", "headers": "extra", "topic": "billing.${kind}",
		 "header_columns": [{"column": "tenant", "header": "x-tenant"}]},
		{"table": "public.audit_log", "id": "ref", "key": "who", "payload": "what", "topic": "audit", "id_header": "ref"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tables, err := mapping.LoadTables(file)
	if err != nil {
		t.Fatal(err)
	}
	// Rows already in a mapped table without order columns when the slot
	// is created are not relayed, and the relay says so as it creates the
	// slot.
	b.exec(t, `INSERT INTO public.audit_log VALUES ('a-0', 'zed', 'before the slot')`)
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, tables)
	core, logs := observer.New(zap.WarnLevel)
	cfg.Logger = zap.New(core)
	b.startRelay(t, cfg)
	if w := logs.FilterMessageSnippet("have no order columns, so they are relayed from this moment on").All(); len(w) != 1 ||
		!strings.Contains(fmt.Sprint(w[0].ContextMap()["tables"]), "public.audit_log") {
		t.Errorf("no warning at the slot's creation naming the mapped tables: %v", logs.All())
	}

	b.exec(t, `INSERT INTO billing.outbox (account, kind, tenant, body, extra, at) VALUES
		('acc-1', 'paid', 't1', '\x0001ff', '{"trace": "abc"}', '2026-01-02 03:04:05+00'),
		('acc-1', 'refunded', NULL, '\x02', NULL, '2026-01-02 03:04:06+00'),
		('acc-1', 'paid', 't1', '\x03', NULL, '2026-01-02 03:04:07+00')`)
	b.exec(t, `INSERT INTO public.audit_log VALUES ('a-1', 'alice', 'login'), ('a-2', 'bob', 'logout')`)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('audit', 'carol', '"native"')`)
	b.waitStatus(t, "SENT", 6, 30*time.Second)

	paid := kafkatest.Consume(t, b.brokers, 2, 10*time.Second, "billing.paid")
	if string(paid[0].Value) != "\x00\x01\xff" || string(paid[0].Key) != "acc-1" || string(paid[1].Value) != "\x03" {
		t.Errorf("billing.paid: %q %q, %q", paid[0].Key, paid[0].Value, paid[1].Value)
	}
	if h := headerList(paid[0]); h != "x-tenant=t1 trace=abc outbox-event-type=paid" {
		t.Errorf("headers %q", h)
	}
	if !paid[0].Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("timestamp %v, want the at column", paid[0].Timestamp)
	}
	audit := kafkatest.Consume(t, b.brokers, 3, 10*time.Second, "audit")
	var got []string
	for _, r := range audit {
		got = append(got, fmt.Sprintf("%s:%s:%s", r.Key, r.Value, headerList(r)))
	}
	if strings.Join(got, " ") != `alice:login:ref=a-1 bob:logout:ref=a-2 carol:"native":` {
		t.Errorf("audit: %v", got)
	}
	for _, q := range []string{
		`SELECT count(*) FROM outbox.deliveries WHERE event_id = outbox.event_id('billing.outbox', '2') AND status = 'SENT'`,
		`SELECT count(*) FROM outbox.deliveries WHERE event_id = outbox.event_id('public.audit_log', 'a-2') AND status = 'SENT'`,
		`SELECT count(*) FROM outbox.delivery_stats WHERE source = 'billing.outbox' AND topic = 'billing.paid' AND events = 2`,
	} {
		if pgtest.Count(t, b.pool, q) != 1 {
			t.Errorf("%s: not 1", q)
		}
	}
}

func TestMapped_AMappingThatDoesNotFitStopsTheRelayNamingOptionAndColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, debeziumTable)
	b.exec(t, `CREATE TABLE public.loose (id text, aggregatetype text, aggregateid text, payload numeric)`)
	// The relay's role does not own the publication: it cannot add a table.
	b.exec(t, `CREATE TABLE public.scratch (id uuid PRIMARY KEY, payload jsonb)`)
	b.exec(t, `CREATE PUBLICATION outbox_relay_mapped FOR TABLE outbox.events WITH (publish = 'insert')`)
	cases := []struct {
		name, file string
		want       []string
	}{
		{"MissingColumn", `{"tables": [{"table": "public.outboxevent", "id": "id", "key": "aggregate_id", "payload": "payload", "topic": "t"}]}`,
			[]string{`tables[0].key names column "aggregate_id"`}},
		{"UnknownTemplateColumn", `{"tables": [{"table": "public.outboxevent", "id": "id", "payload": "payload", "topic": "e.${kind}"}]}`,
			[]string{`tables[0].topic names column "kind"`}},
		{"UnreadableTypeAndNonUniqueID", `{"tables": [{"table": "public.loose", "id": "id", "payload": "payload", "topic": "t"}]}`,
			[]string{`tables[0].payload: column "payload" (payload) has type numeric`, `tables[0].id: column "id" of public.loose is not unique`}},
		{"NoSuchTable", `{"tables": [{"table": "public.nope", "id": "id", "payload": "p", "topic": "t"}]}`,
			[]string{"table public.nope does not exist"}},
		{"NotInThePublicationAndCannotBeAdded", `{"tables": [{"table": "public.scratch", "id": "id", "payload": "payload", "topic": "t"}]}`,
			// PostgreSQL's own refusal follows.
			[]string{`run: ALTER PUBLICATION "outbox_relay_mapped" ADD TABLE "public"."scratch"`,
				`the relay could not add them itself: ALTER PUBLICATION "outbox_relay_mapped" ADD TABLE "public"."scratch": ERROR: must be owner`,
				"(SQLSTATE 42501)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tables, err := mapping.ParseTables("t.json", []byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			cfg := b.config(t)
			cfg.Tables, cfg.Publication = tables, "outbox_relay_mapped"
			err = runToError(t, cfg)
			if !relay.IsSetup(err) {
				t.Fatalf("Run = %v, want a setup error", err)
			}
			var bad *mapping.BadConfig
			if !errors.As(err, &bad) {
				t.Fatalf("Run = %v, want a *mapping.BadConfig", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// seedCopies writes the kept records of mapped events of each age and
// status directly, with their status rows, as the stream leaves them.
func seedCopies(t *testing.T, b *testBundle) {
	t.Helper()
	b.exec(t, `WITH c AS (
		INSERT INTO outbox.mapped_events (id, source, source_id, topic, created_at)
		SELECT outbox.event_id('public.outboxevent', a), 'public.outboxevent', a, 'orders',
		       CASE WHEN a LIKE 'old%' THEN now() - interval '10 days' ELSE now() - interval '1 day' END
		FROM unnest(ARRAY['old-sent', 'recent-sent', 'old-failed']) AS a RETURNING id, source_id AS a)
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, failure_reason, source, created_at)
		SELECT id, CASE WHEN a LIKE '%sent' THEN 'SENT' ELSE 'FAILED' END, 1, now(),
		       CASE WHEN a LIKE '%failed' THEN 'INVALID_TOPIC' END, 'public.outboxevent',
		       CASE WHEN a LIKE 'old%' THEN now() - interval '10 days' ELSE now() - interval '1 day' END
		FROM c;
		-- delivered on its first try: no copy
		INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, source, topic, created_at)
		VALUES (outbox.event_id('public.outboxevent', 'old-sent-first-try'), 'SENT', 1, now(), 'public.outboxevent', 'orders',
		        now() - interval '10 days')`)
}

// mappedLeft lists the status rows of mapped events left, by their copy's
// id ("first-try" for a row without a copy), and checks no copy outlives
// its status row.
func mappedLeft(t *testing.T, b *testBundle) string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT coalesce(m.source_id, 'first-try') FROM outbox.deliveries d
		LEFT JOIN outbox.mapped_events m ON m.id = d.event_id WHERE d.source IS NOT NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		left = append(left, a)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.mapped_events m
		WHERE NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = m.id)`); n != 0 {
		t.Errorf("%d copies outlive their status rows", n)
	}
	return strings.Join(left, ",")
}

func TestRetention_DeletesOldSENTMappedEventsWithTheirCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	seedCopies(t, b)
	cfg := b.config(t)
	cfg.Retention = 7 * 24 * time.Hour
	b.startRelay(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "old SENT rows of mapped events deleted", func() (bool, string) {
		left := mappedLeft(t, b)
		return left == "old-failed,recent-sent", left
	})
}

func TestPurge_TakesMappedEventsWithTheirCopiesToo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedCopies(t, b)
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.purge('7 days', 'FAILED')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("outbox.purge('7 days', 'FAILED') = %d, %v; want the old FAILED copy", n, err)
	}
	if left := mappedLeft(t, b); left != "first-try,old-sent,recent-sent" {
		t.Fatalf("left: %s", left)
	}
}

// mappedOrders maps public.orders_outbox (rows deleted in the transaction
// that wrote them) to topic orders, keyed by its key column.
func mappedOrders(t *testing.T, b *testBundle) []*mapping.Table {
	t.Helper()
	b.exec(t, `CREATE TABLE public.orders_outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text, body jsonb)`)
	tables, err := mapping.ParseTables("t.json", []byte(`{"tables": [{"table": "public.orders_outbox", "id": "id", "key": "k",
		"payload": "body", "topic": "orders"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// writeDeleted writes n events to public.orders_outbox over 5 keys, each
// row deleted in the transaction that wrote it.
func writeDeleted(t *testing.T, b *testBundle, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		b.exec(t, fmt.Sprintf(`BEGIN;
			INSERT INTO public.orders_outbox (k, body) VALUES ('k%d', '{"seq": %d}');
			DELETE FROM public.orders_outbox;
			COMMIT`, i%5, i))
	}
}

func TestMapped_DeletedRowsQueuedThroughAKafkaOutageAreDeliveredOnceInKeyOrder(t *testing.T) {
	t.Parallel()
	b, restart := setupRestartable(t)
	b.cluster.Close() // Kafka is unreachable until the events are queued
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, mappedOrders(t, b))
	cfg.SpillAfter = 2 * time.Second
	cfg.Poll.Interval = 50 * time.Millisecond
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)

	const n = 300
	writeDeleted(t, b, n)
	pgtest.Eventually(t, 30*time.Second, "every event queued with its kept record", func() (bool, string) {
		queued := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries d JOIN outbox.mapped_events m ON m.id = d.event_id
			WHERE d.status = 'PENDING' AND d.attempts = 0 AND d.key = m.key`)
		return queued == n, fmt.Sprintf("%d of %d queued", queued, n)
	})
	if left := pgtest.Count(t, b.pool, `SELECT count(*) FROM public.orders_outbox`); left != 0 {
		t.Fatalf("%d rows in the application's table", left)
	}
	restart()
	checkDelivered(t, b, n)
	// A table's first counts wait for a scrape that shows them at 0.
	pgtest.Eventually(t, 10*time.Second, "queued and sent counted by table", func() (bool, string) {
		m := scrape(t, srv)
		var diffs []string
		for _, outcome := range []string{"queued", "sent"} {
			sample := fmt.Sprintf(`outbox_relay_mapped_events_total{outcome=%q,table="public.orders_outbox"}`, outcome)
			if m[sample] != n {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", sample, m[sample], n))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
}

func TestMapped_APartitionPlacementPutsEachEventOnItsColumnsPartition(t *testing.T) {
	t.Parallel()
	b := setup(t) // orders: three partitions
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 3, 1, nil, "outbox.event.shard"); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `CREATE TABLE public.sharded (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL,
		aggregateid text NOT NULL, shard int, payload jsonb)`)
	d, err := mapping.ParseDebezium("c.json", map[string]string{
		"connector.class":        "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list":     "public.sharded",
		"transforms":             "outbox",
		"transforms.outbox.type": mapping.EventRouter,
		"transforms.outbox.table.fields.additional.placement": "shard:partition",
		"key.converter":   "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, d.Tables)
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO public.sharded (aggregatetype, aggregateid, shard, payload) VALUES
		('shard', 'same-key', 0, '{"n": 0}'), ('shard', 'same-key', 2, '{"n": 2}'), ('shard', 'same-key', 1, '{"n": 1}'),
		('shard', 'same-key', 7, '{"n": 7}')`)
	b.waitStatus(t, "SENT", 3, 30*time.Second)
	b.waitStatus(t, "FAILED", 1, 30*time.Second)
	for _, r := range kafkatest.Consume(t, b.brokers, 3, 10*time.Second, "outbox.event.shard") {
		if want := fmt.Sprintf(`{"n": %d}`, r.Partition); string(r.Value) != want {
			t.Errorf("partition %d holds %s, want %s", r.Partition, r.Value, want)
		}
	}
	var reason, lastErr string
	if err := b.pool.QueryRow(context.Background(), `SELECT failure_reason, last_error FROM outbox.deliveries WHERE status = 'FAILED'`).
		Scan(&reason, &lastErr); err != nil || reason != kafka.ReasonInvalidPartition || !strings.Contains(lastErr, "partition 7") {
		t.Errorf("the event placed on partition 7 of 3: %s %q (%v)", reason, lastErr, err)
	}
}

// runToError runs a relay that must stop by itself within 30 s (a setup
// error) and returns what Run returned.
func runToError(t *testing.T, cfg relay.Config) error {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Run(ctx)
}

// mapped does for tables what `outbox-relay migrate` does for mapped tables
// (the relay's role may not): adds them to the publication and grants
// outbox_relay SELECT on them. It returns tables.
func (b *testBundle) mapped(t *testing.T, tables []*mapping.Table) []*mapping.Table {
	t.Helper()
	for _, tb := range tables {
		b.exec(t, tb.PublicationSQL("outbox_relay"))
		b.exec(t, tb.GrantSQL())
	}
	return tables
}

// A placed column that is NULL is a header with a null value (Debezium's),
// also when the record is made again from its kept copy (a resend).
func TestMapped_ADebeziumHeaderOfANullColumnStaysNullWhenResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text,
		payload jsonb, note text)`)
	d, err := mapping.ParseDebezium("c.json", map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "app",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type":                              mapping.EventRouter,
		"transforms.outbox.table.fields.additional.placement": "note:header",
		"key.converter":                                       "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                                     "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable":                      "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = b.mapped(t, d.Tables)
	b.startRelay(t, cfg)
	const id = "6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e209"
	b.exec(t, `INSERT INTO public.outboxevent VALUES ($1, 'late', 'k', '{}', NULL)`, id)
	b.waitStatus(t, "FAILED", 1, 30*time.Second) // its topic does not exist yet
	if _, err := kadm.NewClient(newKgo(t, b.brokers)).CreateTopics(context.Background(), 1, 1, nil, "outbox.event.late"); err != nil {
		t.Fatal(err)
	}
	var resent bool
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.resend('public.outboxevent', $1)`, id).Scan(&resent); err != nil || !resent {
		t.Fatalf("resend = %v, %v", resent, err)
	}
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	rec := kafkatest.Consume(t, b.brokers, 1, 10*time.Second, "outbox.event.late")[0]
	for _, h := range rec.Headers {
		if h.Key == "note" {
			if h.Value != nil {
				t.Fatalf("header note = %q, want a null value", h.Value)
			}
			return
		}
	}
	t.Fatalf("no header note: %v", rec.Headers)
}

// Debezium writes a timestamp(0..5) column with its own precision, which
// the relay does not: such a placed column is refused at start, not
// written otherwise.
func TestMapped_ADebeziumPlacementOfATimestampWithLessPrecisionIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text,
		payload jsonb, at timestamp(3), made timestamptz(6))`)
	d, err := mapping.ParseDebezium("c.json", map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "app",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type":                              mapping.EventRouter,
		"transforms.outbox.table.fields.additional.placement": "at:header,made:header",
		"transforms.outbox.table.field.event.timestamp":       "at",
	})
	if err != nil {
		t.Fatal(err)
	}
	err = mapping.Check(context.Background(), b.pool, "", d.Tables)
	if err == nil || !strings.Contains(err.Error(), `column "at" of public.outboxevent is timestamp(3)`) || strings.Contains(err.Error(), `"made"`) {
		t.Fatalf("err = %v, want timestamp(3) column at refused as a header (and timestamptz(6) made taken)", err)
	}
}

// Debezium reads route.by.field with Struct.getString, which fails on every
// event of a column that is not a string: such a table is refused at start.
func TestMapped_ADebeziumRoutingColumnThatIsNotAStringIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype integer NOT NULL, aggregateid text, payload jsonb)`)
	d, err := mapping.ParseDebezium("c.json", map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "app",
		"table.include.list": "public.outboxevent", "transforms": "outbox", "transforms.outbox.type": mapping.EventRouter,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = mapping.Check(context.Background(), b.pool, "", d.Tables)
	if err == nil || !strings.Contains(err.Error(), `column "aggregatetype" (topic) has type integer`) {
		t.Fatalf("err = %v, want the integer routing column refused", err)
	}
}
