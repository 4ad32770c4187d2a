package mapping

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
)

func TestLoadDebezium_TakesTheDocsConnectorAsIs(t *testing.T) {
	for _, file := range []string{"testdata/outbox-connector.json", "testdata/outbox-connector.properties"} {
		t.Run(file, func(t *testing.T) {
			d, err := LoadDebezium(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Tables) != 1 {
				t.Fatalf("tables: %d, want 1", len(d.Tables))
			}
			tb := d.Tables[0]
			if tb.QualifiedName() != "public.outboxevent" || tb.ID != "id" || tb.Key != "aggregateid" ||
				tb.Payload != "payload" || tb.Topic != "${aggregatetype}" || tb.IDHeader != "id" {
				t.Errorf("mapping: %+v", tb)
			}
			if tb.KeyConverter != String || tb.ValueConverter != JSON {
				t.Errorf("converters: %v, %v", tb.KeyConverter, tb.ValueConverter)
			}
			if len(tb.Placements) != 1 || tb.Placements[0] != (Placement{Column: "type", Alias: "eventType"}) {
				t.Errorf("placements: %+v", tb.Placements)
			}
			if !strings.HasPrefix(d.DatabaseURL, "postgres://debezium:s3cret-from-connector@db.internal") {
				t.Errorf("database URL: %q", d.DatabaseURL)
			}
			for _, n := range d.Notes {
				if strings.Contains(n, "s3cret") {
					t.Errorf("a note shows the password: %q", n)
				}
			}
		})
	}
}

func TestParseDebezium_NamesEveryUnsupportedOption(t *testing.T) {
	cfg := map[string]string{
		"connector.class":        postgresConnector,
		"table.include.list":     "public\\.outbox.*",
		"transforms":             "outbox,route",
		"transforms.outbox.type": EventRouter,
		"transforms.outbox.table.fields.additional.placement": "p:footer",
		"transforms.outbox.tracing.no.such.option":            "x",
		"transforms.outbox.table.no.such.option":              "v",
		"transforms.route.type":                               "org.apache.kafka.connect.transforms.RegexRouter",
		"value.converter":                                     "io.confluent.connect.avro.AvroConverter",
		"value.converter.schema.registry.url":                 "http://registry",
		"no.such.connector.option":                            "x",
	}
	_, err := ParseDebezium("c.json", cfg)
	var u *Unsupported
	if !errors.As(err, &u) {
		t.Fatalf("err = %v, want *Unsupported", err)
	}
	for _, want := range []string{"table.include.list:", "transforms.route:", "table.fields.additional.placement:",
		"tracing.no.such.option:", "table.no.such.option:", "value.converter:",
		"value.converter.schema.registry.url:", "no.such.connector.option:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

func TestParseDebezium_RefusesWhatTheConverterCannotServe(t *testing.T) {
	cfg := map[string]string{
		"connector.class":        postgresConnector,
		"table.include.list":     "public.outbox",
		"transforms":             "outbox",
		"transforms.outbox.type": EventRouter,
		"transforms.outbox.table.expand.json.payload":         "true",
		"transforms.outbox.table.fields.additional.placement": "type:envelope:eventType",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
	}
	_, err := ParseDebezium("c.json", cfg)
	if err == nil || !strings.Contains(err.Error(), "schemas.enable=false") || !strings.Contains(err.Error(), "type:envelope") {
		t.Fatalf("err = %v", err)
	}
}

// row builds a relation and binary values from (name, oid, value) triples.
func row(cols ...any) (*cdc.Relation, [][]byte) {
	rel := &cdc.Relation{Namespace: "public", Name: "outbox"}
	var values [][]byte
	for i := 0; i < len(cols); i += 3 {
		rel.Columns = append(rel.Columns, cdc.Column{Name: cols[i].(string), TypeOID: cols[i+1].(uint32)})
		switch v := cols[i+2].(type) {
		case nil:
			values = append(values, nil)
		case string:
			b := []byte(v)
			if cols[i+1].(uint32) == OIDJSONB {
				b = append([]byte{1}, b...)
			}
			values = append(values, b)
		case []byte:
			values = append(values, v)
		case int64:
			values = append(values, binary.BigEndian.AppendUint64(nil, uint64(v)))
		}
	}
	return rel, values
}

var uuidBytes = []byte{0x6a, 0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x4a, 0x69, 0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1}

func debeziumTable(key, value Converter, expand bool) *Table {
	t := &Table{Schema: "public", Name: "outbox", ID: "id", Key: "aggregateid", Payload: "payload",
		Topic: "${aggregatetype}", TopicRouter: mustRouter("(?<routedByValue>.*)", "outbox.event.${routedByValue}"), IDHeader: "id",
		Placements:   []Placement{{Column: "type", Alias: "eventType"}},
		KeyConverter: key, ValueConverter: value, ExpandJSON: expand}
	t.catalog.Store(&catalog{notNull: map[string]bool{"id": true, "aggregateid": true}})
	return t
}

func TestRecord_WritesWhatDebeziumWrites(t *testing.T) {
	rel, values := row("id", uint32(OIDUUID), uuidBytes, "aggregatetype", uint32(OIDVarchar), "order",
		"aggregateid", uint32(OIDVarchar), "o-1", "type", uint32(OIDVarchar), "OrderCreated",
		"payload", uint32(OIDJSONB), `{"id": 1, "note": "<b>"}`)
	commit := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name       string
		key, value Converter
		expand     bool
		wantKey    string
		wantValue  string
	}{
		{"StringAndSchemalessJSON", String, JSON, false, `o-1`, `"{\"id\": 1, \"note\": \"<b>\"}"`},
		{"ExpandedJSON", String, JSON, true, `o-1`, `{"id":1,"note":"<b>"}`},
		{"JSONWithSchemas", JSONSchema, JSONSchema, false,
			`{"schema":{"type":"string","optional":false},"payload":"o-1"}`,
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"id\": 1, \"note\": \"<b>\"}"}`},
		{"StringPayload", JSON, String, false, `"o-1"`, `{"id": 1, "note": "<b>"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := debeziumTable(c.key, c.value, c.expand).Bind(rel)
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Record(values, commit)
			if err != nil {
				t.Fatal(err)
			}
			if r.Topic != "outbox.event.order" || string(r.Key) != c.wantKey || string(r.Value) != c.wantValue {
				t.Errorf("got topic %q key %s value %s\nwant key %s value %s", r.Topic, r.Key, r.Value, c.wantKey, c.wantValue)
			}
			if len(r.Headers) != 2 || string(r.Headers[0].Key) != "id" || string(r.Headers[0].Value) != "6a1f2e3d-4c5b-4a69-8897-a6b5c4d3e2f1" ||
				string(r.Headers[1].Key) != "eventType" || string(r.Headers[1].Value) != "OrderCreated" {
				t.Errorf("headers: %+v", r.Headers)
			}
			if !r.Timestamp.Equal(commit) {
				t.Errorf("timestamp %v", r.Timestamp)
			}
		})
	}
}

func TestRecord_EnvelopeAndBigintIDs(t *testing.T) {
	rel, values := row("id", uint32(OIDInt8), int64(42), "aggregatetype", uint32(OIDText), "invoice",
		"aggregateid", uint32(OIDText), "i-9", "type", uint32(OIDText), "Paid", "payload", uint32(OIDBytea), []byte{0, 1, 2})
	tb := debeziumTable(JSON, JSON, false)
	tb.Placements = []Placement{{Column: "type", Alias: "eventType", Envelope: true}}
	b, err := tb.Bind(rel)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record(values, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "42" || string(r.Value) != `{"payload":"AAEC","eventType":"Paid"}` {
		t.Errorf("id %q value %s", r.ID, r.Value)
	}
	if EventID("public.outbox", "42") == EventID("public.outbox", "43") || EventID("a", "b") != EventID("a", "b") {
		t.Error("EventID is not a function of table and id")
	}
}

func TestRecord_ABadRowSaysWhy(t *testing.T) {
	rel, values := row("id", uint32(OIDUUID), uuidBytes, "aggregatetype", uint32(OIDVarchar), nil,
		"aggregateid", uint32(OIDVarchar), "o-1", "type", uint32(OIDVarchar), "T", "payload", uint32(OIDJSONB), `{}`)
	b, err := debeziumTable(String, JSON, false).Bind(rel)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record(values, time.Now())
	if err == nil || !strings.Contains(err.Error(), "aggregatetype") || r.ID == "" {
		t.Errorf("record %+v err %v: want the NULL route column named and the id read", r, err)
	}
}

func TestBind_RefusesAnUnreadableColumn(t *testing.T) {
	rel, _ := row("id", uint32(OIDUUID), nil, "aggregatetype", uint32(OIDVarchar), nil,
		"aggregateid", uint32(OIDVarchar), nil, "type", uint32(OIDVarchar), nil, "payload", uint32(1700), nil)
	_, err := debeziumTable(String, JSON, false).Bind(rel)
	if err == nil || !strings.Contains(err.Error(), `"payload"`) || !strings.Contains(err.Error(), "numeric") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseTables(t *testing.T) {
	tables, err := ParseTables("t.json", []byte(`{"tables": [
		{"table": "outbox.events"},
		{"table": "billing.\"Outbox\"", "id": "seq_id", "key": "account", "payload": "body",
		 "topic": "billing.${kind}", "header_columns": [{"column": "tenant", "header": "x-tenant"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !tables[0].IsEvents() || tables[1].Schema != "billing" || tables[1].Name != "Outbox" || tables[1].Placements[0].Alias != "x-tenant" {
		t.Errorf("tables: %+v %+v", tables[0], tables[1])
	}
	for _, bad := range []string{`{"tables": []}`, `{"tables": [{"table": "a.b", "id": "id", "payload": "p"}]}`,
		`{"tables": [{"table": "a.b", "id": "id", "payload": "p", "topic": "t", "colour": "red"}]}`,
		`{"tables": [{"table": "a.b", "id": "id", "payload": "p", "topic": "t.${"}]}`} {
		if _, err := ParseTables("t.json", []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func mustRouter(re, replacement string) *TopicRouter {
	r, err := NewTopicRouter(re, replacement)
	if err != nil {
		panic(err)
	}
	return r
}

func TestAppendJSONString_IsJSONAsJacksonWritesIt(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "new\nline\ttab\r\b\f", "\x00\x01\x1f", "<b>&amp;</b>", "ünïcødé 😀"} {
		got := AppendJSONString(nil, []byte(s))
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Errorf("%q: %s decodes to %q (%v)", s, got, back, err)
		}
		if strings.ContainsAny(string(got), "\x00\n") || strings.Contains(string(got), `\u003c`) {
			t.Errorf("%q: %s", s, got)
		}
	}
}

func TestRecord_ByteArrayConverterPublishesByteaAsIsAndRefusesText(t *testing.T) {
	rel, values := row("id", uint32(OIDText), "e-1", "aggregatetype", uint32(OIDText), "blob",
		"aggregateid", uint32(OIDText), "k", "type", uint32(OIDText), "T", "payload", uint32(OIDBytea), []byte{0xff, 0x00, 0x7f})
	b, err := debeziumTable(String, Bytes, false).Bind(rel)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record(values, time.Now())
	if err != nil || string(r.Value) != "\xff\x00\x7f" {
		t.Fatalf("value %q, %v", r.Value, err)
	}
	schemas, err := debeziumTable(JSONSchema, JSONSchema, false).Bind(rel)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := schemas.Record(values, time.Now()); string(r.Value) != `{"schema":{"type":"bytes","optional":true},"payload":"/wB/"}` {
		t.Errorf("bytes with schemas: %s", r.Value)
	}
	text, _ := row("id", uint32(OIDText), nil, "aggregatetype", uint32(OIDText), nil,
		"aggregateid", uint32(OIDText), nil, "type", uint32(OIDText), nil, "payload", uint32(OIDJSONB), nil)
	if _, err := debeziumTable(String, Bytes, false).Bind(text); err == nil || !strings.Contains(err.Error(), "ByteArrayConverter") {
		t.Errorf("ByteArrayConverter over jsonb: %v", err)
	}
}
