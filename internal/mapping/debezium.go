package mapping

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magiconair/properties"
)

// EventRouter is the class of Debezium's outbox transform.
const EventRouter = "io.debezium.transforms.outbox.EventRouter"

// Connector classes and converters a Debezium configuration may name.
const (
	postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"
	jsonConverter     = "org.apache.kafka.connect.json.JsonConverter"
	stringConverter   = "org.apache.kafka.connect.storage.StringConverter"
	byteConverter     = "org.apache.kafka.connect.converters.ByteArrayConverter"
	simpleHeaders     = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
	// binaryDataConverter writes bytes as ByteArrayConverter does.
	binaryDataConverter = "io.debezium.converters.BinaryDataConverter"
)

// Debezium is what the relay takes from a Debezium connector's
// configuration.
type Debezium struct {
	Tables []*Table
	// DatabaseURL is built from database.* when they name a host; its
	// password is the file's, so it is a secret.
	DatabaseURL string
	// Notes say, one per option, what the relay does with options that do
	// not change what it publishes (logged at start).
	Notes []string
	// Warnings say what the relay assumed that the configuration leaves
	// open (logged at warn).
	Warnings []string
}

// PropagateTraceContext has each table read the column its
// tracing.span.context.field names (tracingspancontext by default, where
// the table has it) into the record's traceparent and tracestate headers,
// as a Kafka Connect worker with OpenTelemetry propagates the context
// (--debezium-opentelemetry). Without it, as Debezium without
// OpenTelemetry (its default, which the conformance corpus records), the
// column is not read and no trace header is written.
func (d *Debezium) PropagateTraceContext() {
	for _, t := range d.Tables {
		t.TraceContext, t.TraceContextIfPresent = t.debeziumTrace, t.debeziumTraceIfPresent
	}
}

// Unsupported lists options of a Debezium configuration the relay does not
// support: the relay refuses to start rather than ignore them.
type Unsupported struct {
	File    string
	Options []string // "option: why"
}

func (u *Unsupported) Error() string {
	return fmt.Sprintf("--debezium-config %s: %d option(s) the relay does not support:\n  %s",
		u.File, len(u.Options), strings.Join(u.Options, "\n  "))
}

// Debezium's defaults for the outbox transform (Debezium 2 and 3).
var routerDefaults = map[string]string{
	"table.field.event.id":              "id",
	"table.field.event.key":             "aggregateid",
	"table.field.event.payload":         "payload",
	"table.field.event.timestamp":       "",
	"route.by.field":                    "aggregatetype",
	"route.topic.regex":                 "(?<routedByValue>.*)",
	"route.topic.replacement":           "outbox.event.${routedByValue}",
	"table.fields.additional.placement": "",
	"route.tombstone.on.empty.payload":  "false",
	"table.expand.json.payload":         "false",
	// A placed column the table lacks: error (the relay refuses the
	// table at start) or ignore (the placement is left out).
	"table.fields.additional.error.on.missing": "true",
	"table.field.additional.missing":           "",
	// UPDATEs: warn and error drop them, as the relay, which reads
	// inserts only, does; fatal is refused.
	"table.op.invalid.behavior":    "",
	"debezium.op.invalid.behavior": "",
	// Expansion of JSON payloads: whether a JSON null member is kept.
	"table.json.payload.null.behavior": "ignore",
	// Debezium 1.x's event type column, no longer read.
	"table.field.event.type": "type",
	// The version of the value's schema (JsonConverter with schemas).
	"table.field.event.schema.version": "",
	// Trace context: the span context column's traceparent and tracestate
	// become the record's W3C headers. The relay starts no span of its
	// own, so the operation name and the context-only switch change
	// nothing.
	"tracing.span.context.field":      "tracingspancontext",
	"tracing.operation.name":          "debezium-read",
	"tracing.with.context.field.only": "false",
}

// Connector options that change nothing the relay publishes, with what the
// relay does instead.
var connectorNotes = map[string]string{
	"name":                        "the connector's name",
	"connector.class":             "",
	"tasks.max":                   "one relay streams one slot",
	"topic.prefix":                "outbox topics come from the transform, not the prefix",
	"database.server.name":        "outbox topics come from the transform, not the server name",
	"plugin.name":                 "the relay always decodes pgoutput",
	"slot.name":                   "the relay uses its own slot (--slot); Debezium's is left alone",
	"publication.name":            "the relay uses its own publication (--publication)",
	"publication.autocreate.mode": "the relay checks its publication at start",
	"snapshot.mode":               "the relay relays inserts from its slot's creation on (docs/own-table.md: Coming from Debezium)",
	"tombstones.on.delete":        "the relay publishes inserts only",
	"heartbeat.interval.ms":       "the relay confirms its slot itself (--status-interval)",
	"include.schema.changes":      "the relay publishes outbox events only",
	"schema.include.list":         "the tables come from table.include.list",
	"slot.drop.on.stop":           "the relay keeps its slot",
	"max.batch.size":              "see --batch-size",
	"max.queue.size":              "see --max-in-flight",
	"poll.interval.ms":            "the relay streams without polling",
	"errors.tolerance":            "a bad event becomes FAILED; the stream goes on",
	"errors.log.enable":           "a FAILED event is logged",
	"errors.log.include.messages": "a FAILED event is logged",
	"header.converter":            "",
	"database.hostname":           "", "database.port": "", "database.user": "", "database.password": "",
	"database.dbname": "", "database.sslmode": "", "database.sslrootcert": "", "database.sslcert": "",
	"database.sslkey": "", "database.sslpassword": "",
	"table.include.list": "", "table.whitelist": "", "transforms": "",
	"key.converter": "", "value.converter": "",
	"key.converter.schemas.enable": "", "value.converter.schemas.enable": "",
}

// connectorPrefixNotes are families of Debezium PostgreSQL connector
// options that change nothing the relay publishes for an outbox table,
// with why.
var connectorPrefixNotes = []struct{ prefix, note string }{
	{"snapshot.", "the relay takes no snapshot (docs/own-table.md: Coming from Debezium)"},
	{"incremental.snapshot.", "the relay takes no snapshot"},
	{"signal.", "the relay reads no signals"},
	{"notification.", "the relay sends no notifications"},
	{"heartbeat.", "the relay confirms its slot itself (--status-interval)"},
	{"errors.", "a bad event becomes FAILED with its reason; the stream goes on"},
	{"producer.override.", "the relay's producer is configured with its --kafka-* flags"},
	{"consumer.override.", "the relay consumes nothing"},
	{"topic.creation.", "the relay creates no topics"},
	{"offset.", "the relay's position is its slot's"},
	{"predicates", "the relay runs the outbox transform on every row of the outbox tables"},
	{"config.action.reload", "the relay reads its configuration at start"},
	{"publication.", "the relay uses its own publication (--publication)"},
	{"slot.", "the relay uses its own slot (--slot)"},
	{"database.tcpKeepAlive", "the relay's connections keep themselves alive"},
	{"database.initial.statements", "the relay runs no statements of the connector's"},
	{"schema.history.internal.", "PostgreSQL's connector keeps no schema history"},
	{"custom.metric.tags", "see the relay's /metrics"},
	{"post.processors", "the relay runs no post processors"},
	{"column.exclude.list", "the outbox columns the transform reads are named by its options"},
	{"column.include.list", "the outbox columns the transform reads are named by its options"},
	{"message.key.columns", "the key is the transform's table.field.event.key"},
	{"max.queue.size.in.bytes", "see --max-in-flight"},
	{"query.fetch.size", "the relay streams"},
	{"retriable.restart.connector.wait.ms", "the relay retries itself"},
	{"status.update.interval.ms", "see --status-interval"},
	{"xmin.fetch.interval.ms", "the relay reads no xmin"},
	{"lsn.flush.", "the relay confirms what it has recorded"},
	{"flush.lsn.source", "the relay confirms what it has recorded"},
	{"provide.transaction.metadata", "the outbox transform drops transaction metadata"},
	{"event.processing.failure.handling.mode", "a bad event becomes FAILED with its reason"},
	{"skipped.operations", "the relay publishes inserts only: updates, deletes and truncates are never published"},
	{"table.exclude.list", "the tables come from table.include.list"},
	{"schema.exclude.list", "the tables come from table.include.list"},
	{"schema.whitelist", "the tables come from table.include.list (table.whitelist)"},
	{"schema.blacklist", "the tables come from table.include.list"},
	{"table.blacklist", "the tables come from table.include.list"},
	{"include.unknown.datatypes", "the outbox columns' types are checked at start"},
	{"hstore.handling.mode", "outbox columns are not hstore"},
	{"interval.handling.mode", "outbox columns are not intervals"},
	{"money.fraction.digits", "outbox columns are not money"},
	{"unavailable.value.placeholder", "the relay reads inserts, whose values are all there"},
	{"field.name.adjustment.mode", "the outbox's field names are the transform's"},
	{"schema.name.adjustment.mode", "outbox table and column names need no adjustment (see README)"},
	{"converters", "the outbox columns' types are the built-in ones Debezium maps itself"},
	{"transaction.boundary.", "the relay writes no transaction boundaries"},
	{"exactly.once.support", "see README: Delivery status"},
	{"extended.headers.", "the __debezium.context.* headers are written unless extended.headers.enabled=false"},
}

// connectorPrefixNote returns the note of an option of a family above, or of
// an option whose only values change nothing published.
func connectorPrefixNote(option string) (string, bool) {
	for _, n := range connectorPrefixNotes {
		if strings.HasPrefix(option, n.prefix) {
			return n.note, true
		}
	}
	return "", false
}

// LoadDebezium reads a Debezium connector's configuration: its JSON as
// posted to Kafka Connect ({"name": ..., "config": {...}} or the config
// object alone) or a .properties file.
func LoadDebezium(path string) (*Debezium, error) { return LoadDebeziumWithWorker(path, "") }

// LoadDebeziumWithWorker is LoadDebezium with the Kafka Connect worker's
// properties file (--debezium-worker-config; "" for none), whose converters
// apply where the connector names none, as in Kafka Connect.
func LoadDebeziumWithWorker(path, workerPath string) (*Debezium, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--debezium-config: %w", err)
	}
	cfg, err := debeziumOptions(path, raw)
	if err != nil {
		return nil, fmt.Errorf("--debezium-config %s: %w", path, err)
	}
	var worker map[string]string
	if workerPath != "" {
		raw, err := os.ReadFile(workerPath)
		if err != nil {
			return nil, fmt.Errorf("--debezium-worker-config: %w", err)
		}
		p, err := properties.Load(raw, properties.UTF8)
		if err != nil {
			return nil, fmt.Errorf("--debezium-worker-config %s: not a .properties file: %w", workerPath, err)
		}
		p.DisableExpansion = true
		worker = p.Map()
	}
	return ParseDebeziumWithWorker(path, cfg, worker)
}

// converterPrefixes are the options a Kafka Connect worker gives a
// connector that names no converter of its own.
var converterPrefixes = []string{"key.converter", "value.converter", "header.converter"}

// withWorkerConverters returns cfg with the worker's converter settings for
// each converter cfg does not name (Kafka Connect's rule: a connector that
// names a converter configures it alone), and what was assumed.
func withWorkerConverters(cfg, worker map[string]string) (map[string]string, []string) {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		out[k] = v
	}
	var warnings []string
	for _, conv := range converterPrefixes {
		if strings.TrimSpace(cfg[conv]) != "" {
			continue
		}
		if class := strings.TrimSpace(worker[conv]); class != "" {
			for k, v := range worker {
				if k == conv || strings.HasPrefix(k, conv+".") {
					if _, set := cfg[k]; !set {
						out[k] = v
					}
				}
			}
			continue
		}
		if conv == "header.converter" {
			continue // Connect's default, SimpleHeaderConverter, is what the worker's file rarely names
		}
		warnings = append(warnings, fmt.Sprintf("%s: neither the connector's configuration nor a --debezium-worker-config names one: "+
			"Kafka Connect's default is assumed, %s with schemas.enable=true (give the worker's properties file if it sets another)", conv, jsonConverter))
	}
	return out, warnings
}

// debeziumOptions reads the file's options as strings.
func debeziumOptions(path string, raw []byte) (map[string]string, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		if inner, ok := doc["config"].(map[string]any); ok {
			doc = inner
		}
		cfg := map[string]string{}
		for k, v := range doc {
			switch v := v.(type) {
			case string:
				cfg[k] = v
			case json.Number, bool:
				cfg[k] = fmt.Sprint(v)
			default:
				return nil, fmt.Errorf("option %q is not a string, number or boolean", k)
			}
		}
		return cfg, nil
	}
	if ext := filepath.Ext(path); ext == ".json" {
		return nil, errors.New("not valid JSON: it does not start with {")
	}
	p, err := properties.Load(raw, properties.UTF8)
	if err != nil {
		return nil, fmt.Errorf("not a .properties file: %w", err)
	}
	p.DisableExpansion = true
	return p.Map(), nil
}

// ParseDebezium takes the tables and their mapping from a connector's
// options, with Debezium's defaults for every option not set. Options the
// relay does not support are returned together as *Unsupported.
func ParseDebezium(file string, cfg map[string]string) (*Debezium, error) {
	return ParseDebeziumWithWorker(file, cfg, nil)
}

// ParseDebeziumWithWorker is ParseDebezium with a Kafka Connect worker's
// properties (nil for none): its converters apply where cfg names none.
func ParseDebeziumWithWorker(file string, cfg, worker map[string]string) (*Debezium, error) {
	cfg, warnings := withWorkerConverters(cfg, worker)
	p := &debeziumParser{file: file, cfg: cfg, used: map[string]bool{}}
	d := &Debezium{Warnings: warnings}
	if class := p.get("connector.class"); class != postgresConnector {
		p.unsupported("connector.class", fmt.Sprintf("%q: the relay reads PostgreSQL (%s)", class, postgresConnector))
	}
	router := p.router()
	names := p.tableNames()
	keyConv, keyDelegate := p.converter("key")
	valueConv, valueDelegate := p.converter("value")
	headerConv := p.headerConverter()
	context := p.contextHeaders()
	if router != "" {
		for _, name := range names {
			t := p.table(router, name)
			t.KeyConverter, t.ValueConverter, t.HeaderConverter = keyConv, valueConv, headerConv
			t.KeyDelegate, t.ValueDelegate = keyDelegate, valueDelegate
			t.Debezium, t.ContextHeaders = true, context
			if headerConv == JSON {
				t.ContextHeaders = make([]Header, len(context))
				for i, h := range context {
					t.ContextHeaders[i] = Header{Key: h.Key, Value: jsonString(h.Value)}
				}
			}
			p.combinations(t, "transforms."+router+".")
			d.Tables = append(d.Tables, t)
		}
		if len(names) == 0 && p.get("table.include.list") == "" && p.get("table.whitelist") == "" {
			p.unsupported("table.include.list", "not set: name the outbox table(s)")
		}
	}
	p.valued("binary.handling.mode", "bytes", "a bytea column is written as bytes (Debezium's default); base64 and hex change what Debezium writes, which the relay does not")
	p.valued("time.precision.mode", "adaptive,adaptive_time_microseconds", "timestamps are written as Debezium's adaptive mode does")
	p.valued("decimal.handling.mode", "precise,double,string", "numeric columns are refused at start, whatever the mode")
	p.valued("schema.name.adjustment.mode", "none,avro,avro_unicode", "the outbox schema names the relay writes need no adjustment")
	d.Warnings = append(d.Warnings, p.warnings...)
	d.DatabaseURL = p.databaseURL()
	for k, v := range cfg {
		if p.used[k] {
			continue
		}
		note, known := connectorNotes[k]
		if !known {
			note, known = connectorPrefixNote(k)
		}
		switch {
		case !known:
			p.unsupported(k, "not an option the relay knows")
		case note != "":
			d.Notes = append(d.Notes, fmt.Sprintf("%s=%s: %s", k, Redact(k, v), note))
		}
	}
	slices.Sort(d.Notes)
	if len(p.bad) > 0 {
		slices.Sort(p.bad)
		return nil, &Unsupported{File: file, Options: p.bad}
	}
	for _, t := range d.Tables {
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("--debezium-config %s: %w", file, err)
		}
	}
	return d, nil
}

// Redact hides the value of an option that holds a secret.
func Redact(option, value string) string {
	if strings.Contains(option, "password") || strings.Contains(option, "secret") || strings.HasSuffix(option, ".key") {
		return "xxxxx"
	}
	return value
}

type debeziumParser struct {
	file     string
	cfg      map[string]string
	used     map[string]bool
	bad      []string
	warnings []string
}

func (p *debeziumParser) get(k string) string {
	p.used[k] = true
	return strings.TrimSpace(p.cfg[k])
}

// valued takes option when its value is one of values (comma-separated;
// unset is fine): it changes nothing the relay publishes; another value is
// refused with why.
func (p *debeziumParser) valued(option, values, why string) {
	v, set := p.cfg[option]
	if !set {
		return
	}
	p.used[option] = true
	v = strings.ToLower(strings.TrimSpace(v))
	if slices.Contains(strings.Split(values, ","), v) {
		return
	}
	p.unsupported(option, fmt.Sprintf("%q: %s", v, why))
}

func (p *debeziumParser) unsupported(option, why string) {
	p.used[option] = true
	p.bad = append(p.bad, option+": "+why)
}

// router returns the name of the EventRouter transform, checking that it is
// the only transform.
func (p *debeziumParser) router() string {
	list := p.get("transforms")
	var router string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		prefix := "transforms." + name + "."
		class := p.get(prefix + "type")
		if class == EventRouter && router == "" {
			router = name
			continue
		}
		for k := range p.cfg {
			if strings.HasPrefix(k, prefix) {
				p.used[k] = true
			}
		}
		p.unsupported("transforms."+name, fmt.Sprintf("%q: the relay runs one transform, Debezium's %s", class, EventRouter))
	}
	if router == "" {
		p.unsupported("transforms", fmt.Sprintf("no transform of type %s: the relay relays outbox tables only", EventRouter))
	}
	return router
}

// tableNames reads table.include.list: plain names, not patterns.
func (p *debeziumParser) tableNames() []string {
	option := "table.include.list"
	list := p.get(option)
	if list == "" {
		if list = p.get("table.whitelist"); list != "" {
			option = "table.whitelist"
		}
	}
	plain := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\\?\.[A-Za-z_][A-Za-z0-9_$]*)?$`)
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !plain.MatchString(n) {
			p.unsupported(option, fmt.Sprintf("%q is a pattern: name each table as schema.table", n))
			continue
		}
		names = append(names, strings.ReplaceAll(n, `\.`, "."))
	}
	return names
}

// headerConverter reads header.converter: SimpleHeaderConverter (Kafka
// Connect's default) or StringConverter write a header's text, JsonConverter
// its JSON.
func (p *debeziumParser) headerConverter() Converter {
	class := p.get("header.converter")
	schemas := strings.ToLower(p.get("header.converter.schemas.enable"))
	switch class {
	case "", simpleHeaders, stringConverter:
		return Raw
	case jsonConverter:
		if schemas == "false" {
			return JSON
		}
		p.unsupported("header.converter.schemas.enable", fmt.Sprintf("%q: with %s the relay writes headers without schemas (false)", schemas, jsonConverter))
	default:
		p.unsupported("header.converter", fmt.Sprintf("%q: the relay writes headers as %s or %s (schemas.enable=false) does", class, simpleHeaders, jsonConverter))
	}
	return Raw
}

// contextHeaders are Debezium's __debezium.context.* headers, unless
// extended.headers.enabled=false. The run id is drawn at each start, as a
// Debezium task draws its own.
func (p *debeziumParser) contextHeaders() []Header {
	switch v := strings.ToLower(p.get("extended.headers.enabled")); v {
	case "false":
		return nil
	case "", "true":
	default:
		p.unsupported("extended.headers.enabled", fmt.Sprintf("%q: want true or false", v))
		return nil
	}
	name := p.get("topic.prefix")
	if name == "" {
		name = p.get("database.server.name")
	}
	if name == "" {
		p.warnings = append(p.warnings, "topic.prefix is not set (Debezium requires it): "+
			"the __debezium.context.connectorLogicalName header is empty")
	}
	return []Header{
		{Key: []byte("__debezium.context.connectorLogicalName"), Value: []byte(name)},
		{Key: []byte("__debezium.context.taskId"), Value: []byte("0")},
		{Key: []byte("__debezium.context.connectorName"), Value: []byte("postgresql")},
		{Key: []byte("__debezium.context.runId"), Value: uuidV7(time.Now())},
	}
}

// uuidV7 is a random UUID of version 7 (its first 48 bits the time in ms).
func uuidV7(now time.Time) []byte {
	var u [16]byte
	_, _ = rand.Read(u[6:])
	ms := uint64(now.UnixMilli()) //nolint:gosec // after 1970
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u[:])
}

// converter reads key.converter or value.converter. Unset, it is Kafka
// Connect's worker default, JsonConverter with schemas. Debezium's
// BinaryDataConverter is Bytes with its delegate (JsonConverter, by
// default with schemas), which writes what is not bytea.
func (p *debeziumParser) converter(which string) (conv, delegate Converter) {
	option := which + ".converter"
	class := p.get(option)
	schemas := p.get(option + ".schemas.enable")
	if class == binaryDataConverter {
		switch d := p.get(option + ".delegate.converter.type"); d {
		case "", jsonConverter:
			delegate = JSONSchema
			switch s := strings.ToLower(p.get(option + ".delegate.converter.type.schemas.enable")); s {
			case "", "true":
			case "false":
				delegate = JSON
			default:
				p.unsupported(option+".delegate.converter.type.schemas.enable", fmt.Sprintf("%q: want true or false", s))
			}
		default:
			p.unsupported(option+".delegate.converter.type", fmt.Sprintf("%q: the relay's delegate is %s", d, jsonConverter))
		}
	}
	switch v := strings.ToLower(p.get(option + ".replace.null.with.default")); v {
	case "", "true": // Connect's default: a NULL with a column default is written as the default
	default:
		p.unsupported(option+".replace.null.with.default", fmt.Sprintf("%q: the relay writes a column's default in place of NULL, as Connect does by default", v))
	}
	for k := range p.cfg {
		if strings.HasPrefix(k, option+".") && !p.used[k] {
			p.unsupported(k, "a converter setting the relay does not know")
		}
	}
	switch class {
	case "", jsonConverter:
		switch strings.ToLower(schemas) {
		case "", "true":
			return JSONSchema, delegate
		case "false":
			return JSON, delegate
		}
		p.unsupported(option+".schemas.enable", fmt.Sprintf("%q: want true or false", schemas))
	case stringConverter:
		return String, delegate
	case byteConverter, binaryDataConverter, "io.debezium.converters.ByteBufferConverter":
		return Bytes, delegate
	default:
		p.unsupported(option, fmt.Sprintf("%q: the relay writes %s, %s and %s", class, stringConverter, jsonConverter, byteConverter))
	}
	return JSON, delegate
}

// table maps one table with the router's options.
func (p *debeziumParser) table(router, name string) *Table {
	prefix := "transforms." + router + "."
	opt := p.routerOption(prefix)
	p.unknownRouterOptions(prefix)
	t := &Table{Origin: "--debezium-config " + p.file, IDHeader: "id", Options: map[string]string{
		"id": prefix + "table.field.event.id", "key": prefix + "table.field.event.key",
		"payload": prefix + "table.field.event.payload", "timestamp": prefix + "table.field.event.timestamp",
		"topic": prefix + "route.by.field", "placed": prefix + "table.fields.additional.placement",
	}}
	var err error
	if t.Schema, t.Name, err = SplitName(name); err != nil {
		p.unsupported("table.include.list", err.Error())
	}
	t.ID = opt("table.field.event.id")
	t.Key = opt("table.field.event.key")
	t.Payload = opt("table.field.event.payload")
	t.Timestamp = opt("table.field.event.timestamp")
	// Read only with OpenTelemetry (PropagateTraceContext), as Debezium.
	t.debeziumTrace = opt("tracing.span.context.field")
	_, set := p.cfg[prefix+"tracing.span.context.field"]
	t.debeziumTraceIfPresent = !set        // Debezium's default: read it where the table has it
	opt("tracing.operation.name")          // the relay starts no span: nothing to name
	opt("tracing.with.context.field.only") // nor one for events without a context
	t.Options["trace context"] = prefix + "tracing.span.context.field"
	t.Topic = "${" + opt("route.by.field") + "}"
	if t.TopicRouter, err = NewTopicRouter(opt("route.topic.regex"), opt("route.topic.replacement")); err != nil {
		p.unsupported(prefix+"route.topic.regex", err.Error())
	}
	if t.ExpandJSON, err = strconv.ParseBool(opt("table.expand.json.payload")); err != nil {
		p.unsupported(prefix+"table.expand.json.payload", "want true or false")
	}
	if t.TombstoneOnEmpty, err = strconv.ParseBool(opt("route.tombstone.on.empty.payload")); err != nil {
		p.unsupported(prefix+"route.tombstone.on.empty.payload", "want true or false")
	}
	p.missingPlacements(t, prefix, opt)
	p.invalidOps(prefix, opt)
	switch v := strings.ToLower(opt("table.json.payload.null.behavior")); v {
	case "ignore":
	case "optional_bytes":
		t.ExpandNulls = true
	default:
		p.unsupported(prefix+"table.json.payload.null.behavior", fmt.Sprintf("%q: want ignore or optional_bytes", v))
	}
	opt("table.field.event.type") // Debezium 2+ reads it no more: the type is placed like any column
	t.SchemaVersion = opt("table.field.event.schema.version")
	t.ConnectorName = p.cfg["topic.prefix"]
	if t.ConnectorName == "" {
		t.ConnectorName = p.cfg["database.server.name"]
	}
	p.placements(t, prefix, opt("table.fields.additional.placement"))
	return t
}

// routerOption reads the router's option k (prefix is the router's):
// trimmed, or the outbox transform's default when not set. It marks the
// option used.
func (p *debeziumParser) routerOption(prefix string) func(k string) string {
	return func(k string) string {
		if v, ok := p.cfg[prefix+k]; ok {
			p.used[prefix+k] = true
			return strings.TrimSpace(v)
		}
		return routerDefaults[k]
	}
}

// unknownRouterOptions refuses the router's options (prefix is the
// router's) that the outbox transform the relay supports does not have.
func (p *debeziumParser) unknownRouterOptions(prefix string) {
	for k := range p.cfg {
		if !strings.HasPrefix(k, prefix) || k == prefix+"type" {
			continue
		}
		o := strings.TrimPrefix(k, prefix)
		if _, ok := routerDefaults[o]; !ok {
			p.unsupported(k, "not an option of the outbox transform the relay supports")
		}
	}
}

// missingPlacements reads what to do when a column placed by
// table.fields.additional.placement is missing: t places only the columns
// a table has (PlacementsIfPresent) unless either option asks for an error.
func (p *debeziumParser) missingPlacements(t *Table, prefix string, opt func(k string) string) {
	switch v := strings.ToLower(opt("table.fields.additional.error.on.missing")); v {
	case "true":
	case "false":
		t.PlacementsIfPresent = true
	default:
		p.unsupported(prefix+"table.fields.additional.error.on.missing", fmt.Sprintf("%q: want true or false", v))
	}
	switch v := strings.ToLower(opt("table.field.additional.missing")); v {
	case "", "error":
	case "ignore", "warn":
		t.PlacementsIfPresent = true
	default:
		p.unsupported(prefix+"table.field.additional.missing", fmt.Sprintf("%q: want error, warn or ignore", v))
	}
}

// invalidOps reads what to do with an operation other than an insert: the
// relay drops UPDATEs, so it refuses fatal, which would stop at one.
func (p *debeziumParser) invalidOps(prefix string, opt func(k string) string) {
	for _, o := range []string{"table.op.invalid.behavior", "debezium.op.invalid.behavior"} {
		switch v := strings.ToLower(opt(o)); v {
		case "", "warn", "error": // UPDATEs dropped: the relay reads inserts only
		case "fatal":
			p.unsupported(prefix+o, "fatal: the relay reads inserts only, so it cannot stop at an UPDATE as Debezium does; "+
				"use warn (UPDATEs are never published either way)")
		default:
			p.unsupported(prefix+o, fmt.Sprintf("%q: want warn, error or fatal", v))
		}
	}
}

// combinations refuses transform options that the value converter cannot
// serve as Debezium would.
func (p *debeziumParser) combinations(t *Table, prefix string) {
	switch {
	case t.ExpandJSON && t.ValueConverter == JSONSchema && slices.ContainsFunc(t.Placements, func(p Placement) bool { return p.Envelope }):
		p.unsupported(prefix+"table.expand.json.payload",
			"with envelope placements and value.converter.schemas.enable=true the relay does not write the struct Debezium infers; "+
				"set value.converter.schemas.enable=false")
	case t.ExpandJSON && t.ValueConverter != JSON && t.ValueConverter != JSONSchema && t.ValueDelegate == Raw:
		p.unsupported(prefix+"table.expand.json.payload",
			fmt.Sprintf("needs value.converter=%s with schemas.enable=false; the converter is %s", jsonConverter, t.ValueConverter))
	}
	for _, pl := range t.Placements {
		if pl.Envelope && t.ValueConverter != JSON && t.ValueConverter != JSONSchema && t.ValueDelegate == Raw {
			p.unsupported(prefix+"table.fields.additional.placement",
				fmt.Sprintf("%s:envelope needs value.converter=%s (the relay writes the envelope as JSON); the converter is %s",
					pl.Column, jsonConverter, t.ValueConverter))
			return
		}
	}
}

// placements reads table.fields.additional.placement: column:placement[:alias],...
func (p *debeziumParser) placements(t *Table, prefix, list string) {
	option := prefix + "table.fields.additional.placement"
	for _, item := range strings.Split(list, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			p.unsupported(option, fmt.Sprintf("%q: want column:placement[:alias]", item))
			continue
		}
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		pl := Placement{Column: parts[0], Alias: parts[0]}
		if len(parts) == 3 {
			pl.Alias = parts[2]
		}
		switch strings.ToLower(parts[1]) {
		case "header":
		case "envelope":
			pl.Envelope = true
		case "partition":
			pl.Partition = true
		default:
			p.unsupported(option, fmt.Sprintf("%q: placement %q is not header, envelope or partition", item, parts[1]))
			continue
		}
		t.Placements = append(t.Placements, pl)
	}
}

// databaseURL builds a connection URL from database.*, or "" without a host.
func (p *debeziumParser) databaseURL() string {
	host := p.get("database.hostname")
	if host == "" {
		return ""
	}
	u := &url.URL{Scheme: "postgres", Host: host, Path: "/" + p.get("database.dbname")}
	if port := p.get("database.port"); port != "" {
		u.Host += ":" + port
	}
	user, pass := p.get("database.user"), p.get("database.password")
	if pass != "" {
		u.User = url.UserPassword(user, pass)
	} else if user != "" {
		u.User = url.User(user)
	}
	q := url.Values{}
	for _, k := range []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword"} {
		if v := p.get("database." + k); v != "" {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
