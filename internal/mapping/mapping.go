// Package mapping says how a row of an outbox table becomes a Kafka record:
// which column is the event id, the key, the payload, the timestamp, the
// event type and the headers, and how the topic is made. It is the one place
// the stream's decoder (Bind, Record) and the SQL (Check, Quote) read a
// table's shape from; outbox.events itself keeps its own fixed layout.
//
// A mapping comes from a tables file (ParseTables) or from a Debezium
// connector's configuration (ParseDebezium).
package mapping

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Converter is how a key or value is serialized, as Kafka Connect's
// converters do it.
type Converter uint8

const (
	// Raw publishes the column's bytes: text as UTF-8, bytea as is, jsonb
	// in PostgreSQL's text form. It is StringConverter for text and
	// ByteArrayConverter for bytea.
	Raw Converter = iota
	// JSON is JsonConverter with schemas.enable=false: a JSON value.
	JSON
	// JSONSchema is JsonConverter with schemas.enable=true: an envelope
	// {"schema": ..., "payload": ...}.
	JSONSchema
	// Bytes is ByteArrayConverter: a bytea column's bytes, nothing else.
	Bytes
	// String is StringConverter: a column's text; not for bytea.
	String
)

// For is the converter that writes a column of type oid: Debezium's
// BinaryDataConverter (Bytes with a delegate other than Raw) writes bytea
// as it is and hands any other type to its delegate.
func (c Converter) For(oid uint32, delegate Converter) Converter {
	if c == Bytes && delegate != Raw && oid != OIDBytea {
		return delegate
	}
	return c
}

func (c Converter) String() string {
	switch c {
	case JSON:
		return "JsonConverter (schemas.enable=false)"
	case JSONSchema:
		return "JsonConverter (schemas.enable=true)"
	case Bytes:
		return "ByteArrayConverter"
	case String:
		return "StringConverter"
	}
	return "raw"
}

// Placement puts a column into every record: as a header or as a field of
// the value's envelope, named Alias.
type Placement struct {
	Column string
	Alias  string
	// Envelope: a field of the value ({"payload": ..., Alias: ...}) rather
	// than a header.
	Envelope bool
	// Partition: the column (an integer) is the record's partition
	// (Debezium's "partition" placement); Alias is unused.
	Partition bool
}

// Table maps one table. Column fields name columns; "" means none.
type Table struct {
	Schema, Name string
	ID           string // required: unique, uuid, bigint, integer or text
	Key          string // the record's key; also the key of per-key order
	Payload      string // the record's value: jsonb, json, text or bytea
	Timestamp    string // the record's timestamp; the commit time when ""
	EventType    string // an outbox-event-type header, as outbox.events has
	Headers      string // a jsonb/json object of string values, as outbox.events has
	// Topic is a template over columns: literal text and ${column}.
	Topic string
	// TopicRouter, when set, routes the template's result to the topic
	// (Debezium's route.topic.regex and route.topic.replacement, with
	// Java's regex semantics).
	TopicRouter *TopicRouter
	Placements  []Placement
	// IDHeader, when set, is a header carrying the event id's text
	// (Debezium's "id").
	IDHeader string
	// ExpandJSON publishes a JSON payload as JSON rather than as a JSON
	// string (Debezium's table.expand.json.payload), with JSON converters.
	ExpandJSON bool
	// KeyConverter and ValueConverter serialize the key and the value.
	KeyConverter, ValueConverter Converter
	// KeyDelegate and ValueDelegate, unless Raw, are the delegates of
	// Debezium's BinaryDataConverter (a Bytes converter): they write
	// columns that are not bytea.
	KeyDelegate, ValueDelegate Converter
	// Debezium: the table comes from a Debezium configuration, and its
	// records follow Debezium's rules where a tables file's differ: a NULL
	// key or payload goes through its converter (JsonConverter writes
	// null), a NULL partition column leaves the record to the key's
	// partition, a NULL placed column is a header with a null value, and a
	// tombstone may have no key.
	Debezium bool
	// ContextHeaders come first on every record: Debezium's
	// __debezium.context.* headers (extended.headers.enabled).
	ContextHeaders []Header
	// TombstoneOnEmpty makes a NULL, empty or blank text payload a
	// tombstone (Debezium's route.tombstone.on.empty.payload).
	TombstoneOnEmpty bool
	// HeaderConverter writes placed headers: Raw (SimpleHeaderConverter:
	// a column's text) or JSON (JsonConverter without schemas).
	HeaderConverter Converter
	// PlacementsIfPresent leaves out a placement whose column the table
	// lacks (Debezium's table.field.additional.missing=ignore).
	PlacementsIfPresent bool
	// ExpandNulls keeps JSON null members of an expanded payload
	// (table.json.payload.null.behavior=optional_bytes).
	ExpandNulls bool
	// SchemaVersion names the column whose value is the version of the
	// value's schema (table.field.event.schema.version); ConnectorName is
	// the connector's topic.prefix, which names that schema.
	SchemaVersion, ConnectorName string
	// TraceContext names a column holding the event's W3C trace context:
	// a traceparent value, or Java properties text with traceparent and
	// tracestate lines (Debezium's tracing.span.context.field). Its
	// values become the traceparent and tracestate headers.
	TraceContext string
	// TraceContextIfPresent: the column is read only when the table has it
	// (Debezium's default, tracingspancontext).
	TraceContextIfPresent bool
	// debeziumTrace and debeziumTraceIfPresent are a Debezium table's
	// tracing.span.context.field, read only once PropagateTraceContext
	// makes them TraceContext.
	debeziumTrace          string
	debeziumTraceIfPresent bool
	// CESource is the table's CloudEvents source ("" for the relay's), and
	// CEAttributes the columns that are its events' optional attributes.
	CESource     string
	CEAttributes []CEAttribute
	// Origin says where the mapping came from, for errors: "--tables-config
	// tables.json" or "--debezium-config connector.json".
	Origin string
	// Options names, for errors, the option behind each use of a column
	// ("key", "topic", "placed"...) as the configuration spells it.
	Options map[string]string

	// catalog is Check's last reading of the catalog: the stream's
	// sessions check again while the poller reads it.
	catalog atomic.Pointer[catalog]
}

// catalog is what Check read of a table.
type catalog struct {
	notNull    map[string]bool   // which mapped columns are NOT NULL
	defaults   map[string]string // mapped columns' DEFAULT expressions (pg_get_expr)
	ordered    bool              // the order columns exist (order.go)
	payloadOID uint32            // the payload column's type
}

// QualifiedName is the table's schema-qualified name as users write it.
func (t *Table) QualifiedName() string { return t.Schema + "." + t.Name }

// Ident is the table's name quoted for SQL.
func (t *Table) Ident() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// IsEvents reports whether t is outbox.events, relayed with its own layout.
func (t *Table) IsEvents() bool { return t.Schema == "outbox" && t.Name == "events" }

// Columns returns every column t reads, each once, with what it is for.
func (t *Table) Columns() []ColumnUse {
	var uses []ColumnUse
	add := func(col, use string) {
		if col != "" {
			uses = append(uses, ColumnUse{Column: col, Use: use})
		}
	}
	add(t.ID, "id")
	add(t.Key, "key")
	add(t.Payload, "payload")
	add(t.Timestamp, "timestamp")
	add(t.EventType, "event type")
	add(t.Headers, "headers")
	for _, c := range templateColumns(t.Topic) {
		add(c, "topic")
	}
	for _, p := range t.Placements {
		if p.Partition {
			add(p.Column, "partition")
		} else {
			add(p.Column, "placed as "+p.Alias)
		}
	}
	if !t.TraceContextIfPresent {
		add(t.TraceContext, "trace context")
	}
	add(t.SchemaVersion, "schema version")
	for _, a := range t.CEAttributes {
		add(a.Column, "cloudevents "+a.Name)
	}
	return uses
}

// ColumnUse is a column and what the mapping reads it for.
type ColumnUse struct{ Column, Use string }

// placement reports whether the column is read for a placement.
func (u ColumnUse) placement() bool {
	return strings.HasPrefix(u.Use, "placed as ") || u.Use == "partition"
}

var templateRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// templateColumns returns the columns a topic template names.
func templateColumns(tmpl string) []string {
	var cols []string
	for _, m := range templateRef.FindAllStringSubmatch(tmpl, -1) {
		cols = append(cols, m[1])
	}
	return cols
}

// validate checks what can be checked without the database.
func (t *Table) validate() error {
	if t.Schema == "" || t.Name == "" {
		return fmt.Errorf("table %q: give it as schema.table", t.QualifiedName())
	}
	if t.IsEvents() {
		return nil
	}
	if t.ID == "" {
		return fmt.Errorf("table %s: no id column", t.QualifiedName())
	}
	if t.Payload == "" {
		return fmt.Errorf("table %s: no payload column", t.QualifiedName())
	}
	if t.Topic == "" {
		return fmt.Errorf("table %s: no topic", t.QualifiedName())
	}
	for _, c := range templateColumns(t.Topic) {
		if c == "" {
			return fmt.Errorf("table %s: topic %q has an empty ${}", t.QualifiedName(), t.Topic)
		}
	}
	if rest := templateRef.ReplaceAllString(t.Topic, ""); strings.Contains(rest, "${") {
		return fmt.Errorf("table %s: topic %q has an unclosed ${", t.QualifiedName(), t.Topic)
	}
	seen := map[string]bool{}
	for _, p := range t.Placements {
		if p.Partition {
			if seen["partition"] {
				return fmt.Errorf("table %s: two columns are placed as the partition", t.QualifiedName())
			}
			seen["partition"] = true
			continue
		}
		if p.Alias == "" {
			return fmt.Errorf("table %s: column %s is placed without a name", t.QualifiedName(), p.Column)
		}
		where := "header"
		if p.Envelope {
			where = "envelope field"
			if p.Alias == "payload" {
				return fmt.Errorf("table %s: envelope field %q is the payload's own", t.QualifiedName(), p.Alias)
			}
		}
		if seen[where+p.Alias] {
			return fmt.Errorf("table %s: two columns are placed as %s %q", t.QualifiedName(), where, p.Alias)
		}
		seen[where+p.Alias] = true
	}
	return nil
}

// SplitName splits "schema.table" (either part may be double-quoted) into
// its parts; a name without a schema is in public.
func SplitName(s string) (schema, name string, err error) {
	parts, err := splitIdent(strings.TrimSpace(s))
	if err != nil {
		return "", "", fmt.Errorf("table name %q: %w", s, err)
	}
	switch len(parts) {
	case 1:
		return "public", parts[0], nil
	case 2:
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("table name %q: want schema.table", s)
}

func splitIdent(s string) ([]string, error) {
	var parts []string
	for s != "" {
		var part string
		if s[0] == '"' {
			end := 1
			for {
				i := strings.IndexByte(s[end:], '"')
				if i < 0 {
					return nil, fmt.Errorf("unclosed quote")
				}
				end += i
				if end+1 < len(s) && s[end+1] == '"' {
					end += 2
					continue
				}
				break
			}
			part = strings.ReplaceAll(s[1:end], `""`, `"`)
			s = s[end+1:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			part, s = s[:i], s[i:]
		}
		if part == "" {
			return nil, fmt.Errorf("empty name")
		}
		parts = append(parts, part)
		if s != "" {
			if s[0] != '.' {
				return nil, fmt.Errorf("unexpected %q", s)
			}
			s = s[1:]
			if s == "" {
				return nil, fmt.Errorf("empty name")
			}
		}
	}
	return parts, nil
}
