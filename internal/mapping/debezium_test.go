package mapping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Java's java.util.regex as Kafka Connect's RegexRouter uses it:
// Matcher.matches() on the whole value, then Matcher.replaceFirst, whose
// replacement reads $n (as many digits as name a group), ${name} and \x
// (Matcher.appendReplacement's documentation).
func TestTopicRouter_RoutesAsJavasMatchesAndReplaceFirst(t *testing.T) {
	for _, c := range []struct{ re, repl, value, want string }{
		{`(?<routedByValue>.*)`, `outbox.event.${routedByValue}`, "Order", "outbox.event.Order"},
		// $1_events_$2 is group 1, "_events_", group 2 (Go's Expand reads "$1_events_" as a name).
		{`(\w+)-(v\d+)`, `$1_events_$2`, "orders-v1", "orders_events_v1"},
		// Not matched as a whole: the value is the topic.
		{`(\w+)-(v\d+)`, `$1_events_$2`, "orders-v1-beta", "orders-v1-beta"},
		// matches() backtracks into the second alternative; replaceFirst's
		// find() stops at the first, shorter one, and the rest is kept.
		{`(?<routedByValue>Order|OrderLine)`, `events.${routedByValue}.v1`, "OrderLine", "events.Order.v1Line"},
		// Named groups in any order.
		{`(?<domain>[a-z]+)\.(?<entity>[A-Za-z]+)`, `${entity}-${domain}-events`, "shop.Order", "Order-shop-events"},
		// $12 with one group is group 1 then "2"; \$ is a dollar.
		{`(a)`, `$12\$`, "a", "a2$"},
		// $0 is the whole match; an unmatched group is empty.
		{`(x)?(a+)`, `[$0|$1|$2]`, "aa", "[aa||aa]"},
		// Named and unnamed groups are numbered together, left to right.
		{`(?<first>a)(b)`, `$2$1`, "ab", "ba"},
	} {
		r, err := NewTopicRouter(c.re, c.repl)
		if err != nil {
			t.Fatalf("%s → %s: %v", c.re, c.repl, err)
		}
		got, err := r.Route(c.value)
		if err != nil || got != c.want {
			t.Errorf("%s → %s on %q: %q, %v; Java gives %q", c.re, c.repl, c.value, got, err, c.want)
		}
	}
}

func TestTopicRouter_RefusesAReplacementJavaWouldThrowOn(t *testing.T) {
	for _, c := range []struct{ re, repl, want string }{
		{`(a)`, `$2`, "no group 2"},
		{`(a)`, `${nope}`, "no group with name {nope}"},
		{`(a)`, `x$`, "group index is missing"},
		{`(a)`, `x\`, "character to be escaped is missing"},
		{`(a)`, `$x`, "illegal group reference"},
	} {
		if _, err := NewTopicRouter(c.re, c.repl); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: err = %v, want %q", c.re, c.repl, err, c.want)
		}
	}
}

// The Debezium examples repository's outbox/register-postgres.json, in its
// Debezium 1.x and 2.x forms, starts as it is.
func TestParseDebezium_TheExamplesRepositorysRegisterPostgresStartsAsItIs(t *testing.T) {
	for name, doc := range map[string]string{
		"1.x": `{
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "database.hostname": "order-db",
    "database.port": "5432",
    "database.user": "postgresuser",
    "database.password": "postgrespw",
    "database.dbname" : "orderdb",
    "database.server.name": "dbserver1",
    "schema.whitelist": "inventory",
    "table.whitelist" : "inventory.outboxevent",
    "tombstones.on.delete" : "false",
    "transforms" : "outbox",
    "transforms.outbox.type" : "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.topic.replacement" : "${routedByValue}.events",
    "transforms.outbox.table.field.event.timestamp" : "timestamp"
}`,
		"2.x": `{
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "database.hostname": "order-db",
    "database.port": "5432",
    "database.user": "postgresuser",
    "database.password": "postgrespw",
    "database.dbname" : "orderdb",
    "topic.prefix": "dbserver1",
    "schema.include.list": "inventory",
    "table.include.list" : "inventory.outboxevent",
    "tombstones.on.delete" : "false",
    "transforms" : "outbox",
    "transforms.outbox.type" : "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.topic.replacement" : "${routedByValue}.events",
    "transforms.outbox.table.field.event.timestamp" : "timestamp",
    "transforms.outbox.table.fields.additional.placement" : "type:header:eventType"
}`,
	} {
		path := filepath.Join(t.TempDir(), "register-postgres.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := LoadDebezium(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tb := d.Tables[0]
		if tb.QualifiedName() != "inventory.outboxevent" || tb.Timestamp != "timestamp" ||
			string(tb.ContextHeaders[0].Value) != "dbserver1" || tb.KeyConverter != JSONSchema {
			t.Errorf("%s: table %s timestamp %q context %q key converter %v", name, tb.QualifiedName(), tb.Timestamp,
				tb.ContextHeaders[0].Value, tb.KeyConverter)
		}
	}
}

// Options Debezium accepts are taken; a fatal UPDATE behaviour, which the
// relay cannot honour, is refused saying why.
func TestParseDebezium_TakesTheOptionsDebeziumAccepts(t *testing.T) {
	cfg := map[string]string{
		"connector.class": postgresConnector, "table.include.list": "public.outbox", "topic.prefix": "app",
		"transforms": "outbox", "transforms.outbox.type": EventRouter,
		"transforms.outbox.table.op.invalid.behavior":            "warn",
		"transforms.outbox.table.field.event.type":               "type",
		"transforms.outbox.table.json.payload.null.behavior":     "optional_bytes",
		"transforms.outbox.table.field.additional.missing":       "ignore",
		"extended.headers.enabled":                               "false",
		"skipped.operations":                                     "t",
		"binary.handling.mode":                                   "bytes",
		"value.converter":                                        binaryDataConverter,
		"value.converter.delegate.converter.type":                jsonConverter,
		"value.converter.delegate.converter.type.schemas.enable": "false",
		"key.converter":                                          jsonConverter,
		"key.converter.replace.null.with.default":                "true",
		"schema.whitelist":                                       "public",
		"signal.data.collection":                                 "public.signals",
		"snapshot.mode":                                          "never",
		"heartbeat.action.query":                                 "SELECT 1",
		"errors.tolerance":                                       "none",
		"transforms.outbox.route.tombstone.on.empty.payload":     "true",
	}
	d, err := ParseDebezium("c.json", cfg)
	if err != nil {
		t.Fatal(err)
	}
	tb := d.Tables[0]
	if tb.ContextHeaders != nil || !tb.PlacementsIfPresent || !tb.ExpandNulls || !tb.TombstoneOnEmpty || tb.ValueConverter != Bytes {
		t.Errorf("table %+v", tb)
	}
	cfg["transforms.outbox.table.op.invalid.behavior"] = "fatal"
	cfg["binary.handling.mode"] = "base64"
	_, err = ParseDebezium("c.json", cfg)
	if err == nil || !strings.Contains(err.Error(), "table.op.invalid.behavior: fatal: the relay reads inserts only") ||
		!strings.Contains(err.Error(), `binary.handling.mode: "base64"`) {
		t.Errorf("err = %v", err)
	}
}

// Converters come from the connector, else from the worker's properties,
// else are Kafka Connect's default, which is said.
func TestParseDebezium_ConvertersComeFromTheWorkerWhereTheConnectorNamesNone(t *testing.T) {
	cfg := map[string]string{
		"connector.class": postgresConnector, "table.include.list": "public.outbox", "topic.prefix": "app",
		"transforms": "outbox", "transforms.outbox.type": EventRouter,
		"key.converter": stringConverter,
	}
	worker := map[string]string{
		"bootstrap.servers": "kafka:9092",
		"key.converter":     jsonConverter, "key.converter.schemas.enable": "true",
		"value.converter": jsonConverter, "value.converter.schemas.enable": "false",
	}
	d, err := ParseDebeziumWithWorker("c.json", cfg, worker)
	if err != nil {
		t.Fatal(err)
	}
	if tb := d.Tables[0]; tb.KeyConverter != String || tb.ValueConverter != JSON {
		t.Errorf("key %v value %v, want the connector's StringConverter and the worker's schemaless JsonConverter", tb.KeyConverter, tb.ValueConverter)
	}
	for _, w := range d.Warnings {
		if strings.Contains(w, "converter") {
			t.Errorf("warned %q though both converters are named", w)
		}
	}
	d, err = ParseDebezium("c.json", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Tables[0].ValueConverter != JSONSchema || !strings.Contains(strings.Join(d.Warnings, "\n"), "value.converter: neither") {
		t.Errorf("value converter %v, warnings %q", d.Tables[0].ValueConverter, d.Warnings)
	}
}

func TestJavaDouble_IsJavasDoubleToString(t *testing.T) {
	for f, want := range map[float64]string{1.5: "1.5", 0.0000001: "1.0E-7", 100: "100.0", 1000: "1000.0", 39.98: "39.98",
		1e7: "1.0E7", 12345678.9: "1.23456789E7", 0.001: "0.001", 0.0001: "1.0E-4", -0.5: "-0.5", 0: "0.0"} {
		if got := javaDouble(f); got != want {
			t.Errorf("javaDouble(%v) = %s, Java gives %s", f, got, want)
		}
	}
}

// Column defaults as Debezium's connector reads pg_get_expr's text.
func TestDebeziumDefault_ReadsPgGetExprAsDebezium(t *testing.T) {
	for _, c := range []struct {
		oid  uint32
		expr string
		json string
		ok   bool
	}{
		{OIDText, `'unassigned'::text`, `"unassigned"`, true},
		{OIDVarchar, `'n/a'::character varying`, `"n/a"`, true},
		{OIDText, `upper('x'::text)`, `""`, true},
		{OIDJSONB, `'{}'::jsonb`, `"{}"`, true},
		{OIDJSONB, `jsonb_build_object()`, `"{}"`, true},
		{OIDUUID, `gen_random_uuid()`, `"00000000-0000-0000-0000-000000000000"`, true},
		{OIDUUID, `'B3C4D5E6-F7A8-4B9C-8D0E-1F2A3B4C5D6E'::uuid`, `"b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e"`, true},
		{OIDInt4, `1`, `1`, true},
		{OIDInt4, `'-1'::integer`, `-1`, true},
		{OIDInt8, `nextval('inventory.outbox_seq'::regclass)`, `0`, true},
		{OIDBool, `false`, `false`, true},
		{OIDBool, `true`, `true`, true},
		{OIDTimestamptz, `now()`, `"1970-01-01T00:00:00.000000Z"`, true},
		{OIDTimestamptz, `CURRENT_TIMESTAMP`, `"1970-01-01T00:00:00.000000Z"`, true},
		{OIDTimestamptz, `'2024-03-01 05:29:59.5+00'::timestamp with time zone`, `"2024-03-01T05:29:59.500000Z"`, true},
		{OIDTimestamp, `now()`, `0`, true},
		{OIDBytea, `'\x00'::bytea`, ``, false},
	} {
		d, ok := debeziumDefault(c.oid, c.expr)
		if ok != c.ok || d.json != c.json {
			t.Errorf("%s default %s: %q, %v; Debezium: %q, %v", TypeName(c.oid), c.expr, d.json, ok, c.json, c.ok)
		}
	}
}

// table.expand.json.payload as Debezium's expansion and JsonConverter
// (schemas.enable=false) write it.
func TestExpandJSON_WritesWhatDebeziumsExpansionWrites(t *testing.T) {
	for _, c := range []struct {
		in, want  string
		keepNulls bool
	}{
		{in: `{"n": null, "e": [], "d": 1.50, "x": 1e3, "t": 0.0000001, "o": {}}`, want: `{"d":1.5,"x":1000.0,"t":1.0E-7,"o":{}}`},
		{in: `{"b": 1, "a": 2, "b": 3}`, want: `{"b":3,"a":2}`},
		{in: `{"objs": [{"a": 1}, null, {"b": "x"}]}`, want: `{"objs":[{"a":1,"b":null},null,{"a":null,"b":"x"}]}`},
		{in: `{"v": [1, null, 3]}`, want: `{"v":[1,null,3]}`},
		{in: `{"n": null}`, want: `{"n":null}`, keepNulls: true},
		{in: `{"a": [null, null]}`, want: `{"a":[null,null]}`, keepNulls: true},
		{in: `{"s": "\u0001\ud83d\ude00"}`, want: `{"s":"\u0001\uD83D\uDE00"}`},
		{in: `[]`, want: `"[]"`},
	} {
		got, ok, err := expandJSON([]byte(c.in), c.keepNulls)
		if err != nil || !ok || string(got) != c.want {
			t.Errorf("%s: %s, %v, %v; Debezium writes %s", c.in, got, ok, err, c.want)
		}
	}
	// Left as a JSON string, with a warning in Debezium.
	for _, in := range []string{`not json`, `"quoted"`, `{"m": [1, "x"]}`, `{"m": [1, 12345678901]}`, `{"a": [null]}`, `{"a": 1`} {
		if got, ok, err := expandJSON([]byte(in), false); ok || err != nil {
			t.Errorf("%s: %s, %v, %v; Debezium keeps it as it is", in, got, ok, err)
		}
	}
	// Debezium's task fails.
	for _, in := range []string{`{"h": 123456789012345678901234567890}`, `[1, 2]`, `{"l": [{"p": 9.90}, {"p": 100}]}`} {
		if _, _, err := expandJSON([]byte(in), false); err == nil {
			t.Errorf("%s: expanded; Debezium's converter fails on it", in)
		}
	}
}

// Debezium's BinaryDataConverter writes a bytea payload as it is and hands
// any other column to its delegate, JsonConverter.
func TestParseDebezium_BinaryDataConverterDelegatesWhatIsNotBytea(t *testing.T) {
	d, err := ParseDebezium("c.json", map[string]string{
		"connector.class": postgresConnector, "table.include.list": "public.outbox", "topic.prefix": "app",
		"transforms": "outbox", "transforms.outbox.type": EventRouter,
		"key.converter":   stringConverter,
		"value.converter": binaryDataConverter, "value.converter.delegate.converter.type": jsonConverter,
		"value.converter.delegate.converter.type.schemas.enable": "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	tb := d.Tables[0]
	if tb.ValueConverter.For(OIDBytea, tb.ValueDelegate) != Bytes || tb.ValueConverter.For(OIDJSONB, tb.ValueDelegate) != JSON {
		t.Errorf("bytea: %v, jsonb: %v; want ByteArrayConverter's bytes and the schemaless JsonConverter",
			tb.ValueConverter.For(OIDBytea, tb.ValueDelegate), tb.ValueConverter.For(OIDJSONB, tb.ValueDelegate))
	}
	tb.catalog.Store(&catalog{notNull: map[string]bool{"id": true}})
	rel, values := row("id", uint32(OIDText), "6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e201", "aggregatetype", uint32(OIDText), "order",
		"aggregateid", uint32(OIDText), "o-1", "payload", uint32(OIDJSONB), `{"a": 1}`)
	b, err := tb.Bind(rel)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record(values, time.Now())
	if err != nil || string(r.Value) != `"{\"a\": 1}"` {
		t.Errorf("value %s, %v; want the delegate's JSON string", r.Value, err)
	}
}
