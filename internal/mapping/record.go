package mapping

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/IBM/sarama"

	"github.com/outbox-relay/outbox-relay/cdc"
)

// Header is one Kafka header a mapping places: sarama's, so that a record's
// headers reach the producer as they are, without a copy.
type Header = sarama.RecordHeader

// Record is what one row becomes on Kafka.
type Record struct {
	// ID is the id column's text; EventID derives the status row's id from it.
	ID string
	// HasID: the id column was read (it may be ''); false when it is NULL
	// or not text.
	HasID bool
	Topic string
	// Key is the record's key as its converter writes it, nil without one.
	// It is also the key of per-key order.
	Key   []byte
	Value []byte // nil: a tombstone
	// Headers come first, in order: the id header, then placed columns.
	Headers []Header
	// HeadersJSON is the headers column (a JSON object), or nil.
	HeadersJSON []byte
	EventType   []byte
	Timestamp   time.Time
	// Partition is the record's partition when a column is placed as it;
	// -1: the partitioner places the record by its key.
	Partition int32
	// Seq is the row's outbox_seq (order.go), 0 without one: the key order
	// of the event once it waits.
	Seq int64
	// CE are the event's optional CloudEvents attributes (CEAttributes)
	// that are not NULL.
	CE []Header
}

// Bound is a Table read against one version of its relation, as pgoutput
// described it. Columns are found by name.
type Bound struct {
	t       *Table
	rel     *cdc.Relation
	notNull map[string]bool
	idx     map[string]int
	parts   []topicPart // t.Topic, parsed
	// idHeader and aliases are t.IDHeader and the placements' aliases, as
	// header names.
	idHeader []byte
	aliases  [][]byte
	envelope []Placement       // t's envelope placements
	seq      int               // the index of outbox_seq; -1: none
	trace    int               // the index of the trace context column; -1: none
	routes   map[string]string // template result -> topic (through t.TopicRouter): few values, many rows
	// defaults are Debezium's column defaults by column index (nil
	// without any), put in place of a NULL in every column but those
	// read with Connect's typed getters (topic, timestamp, partition);
	// defaultJSON the same by column name, for schemas.
	defaults    map[int]columnDefault
	defaultJSON map[string]string
	// keyConv and valueConv are t's converters for the key and payload
	// columns' types (BinaryDataConverter's delegate for a column that is
	// not bytea).
	keyConv, valueConv Converter
}

// topicPart is literal text, or the value of the column it names.
type topicPart struct {
	text   string
	column bool
}

// maxRoutes bounds the topic cache; past it topics are computed each time.
const maxRoutes = 4096

// Bind finds t's columns in rel. Check must have run: it read which columns
// are NOT NULL, for the JSON converter's schemas.
func (t *Table) Bind(rel *cdc.Relation) (*Bound, error) {
	b := &Bound{t: t, rel: rel, idx: map[string]int{}, seq: -1, trace: -1}
	var exprs map[string]string
	if c := t.catalog.Load(); c != nil {
		b.notNull, exprs = c.notNull, c.defaults
	}
	if i := rel.ColumnIndex(OrderSeq); i >= 0 && rel.Columns[i].TypeOID == OIDInt8 {
		b.seq = i
	}
	for _, u := range t.Columns() {
		i := rel.ColumnIndex(u.Column)
		if i < 0 && t.PlacementsIfPresent && u.placement() {
			continue
		}
		if i < 0 {
			return nil, fmt.Errorf("table %s: column %q (%s) is not in the stream; is it a generated column, or was it dropped?",
				t.QualifiedName(), u.Column, u.Use)
		}
		if err := readable(u, rel.Columns[i].TypeOID, t); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.QualifiedName(), err)
		}
		b.idx[u.Column] = i
	}
	if t.TraceContext != "" {
		if i := rel.ColumnIndex(t.TraceContext); i >= 0 && readable(ColumnUse{t.TraceContext, "trace context"}, rel.Columns[i].TypeOID, t) == nil {
			b.trace, b.idx[t.TraceContext] = i, i
		}
	}
	last := 0
	for _, m := range templateRef.FindAllStringSubmatchIndex(t.Topic, -1) {
		if m[0] > last {
			b.parts = append(b.parts, topicPart{text: t.Topic[last:m[0]]})
		}
		b.parts = append(b.parts, topicPart{text: t.Topic[m[2]:m[3]], column: true})
		last = m[1]
	}
	if last < len(t.Topic) {
		b.parts = append(b.parts, topicPart{text: t.Topic[last:]})
	}
	b.routes = map[string]string{}
	if t.IDHeader != "" {
		b.idHeader = []byte(t.IDHeader)
	}
	if t.Debezium {
		b.bindDefaults(exprs)
	}
	b.keyConv, b.valueConv = t.KeyConverter, t.ValueConverter
	if i, ok := b.idx[t.Key]; ok && t.Key != "" {
		b.keyConv = t.KeyConverter.For(rel.Columns[i].TypeOID, t.KeyDelegate)
	}
	if i, ok := b.idx[t.Payload]; ok {
		b.valueConv = t.ValueConverter.For(rel.Columns[i].TypeOID, t.ValueDelegate)
	}
	if hasEnvelope(t.Placements) { // the value is a struct, never bytes
		b.valueConv = t.ValueConverter.For(0, t.ValueDelegate)
	}
	for _, p := range t.Placements {
		b.aliases = append(b.aliases, []byte(p.Alias))
		if p.Envelope {
			b.envelope = append(b.envelope, p)
		}
	}
	return b, nil
}

// bindDefaults reads the mapped columns' defaults as Debezium does.
func (b *Bound) bindDefaults(exprs map[string]string) {
	typed := map[string]bool{b.t.Timestamp: true}
	for _, c := range templateColumns(b.t.Topic) {
		typed[c] = true
	}
	for _, p := range b.t.Placements {
		if p.Partition {
			typed[p.Column] = true
		}
	}
	for col, expr := range exprs {
		i, ok := b.idx[col]
		if !ok {
			continue
		}
		d, ok := debeziumDefault(b.rel.Columns[i].TypeOID, expr)
		if !ok {
			continue
		}
		if b.defaultJSON == nil {
			b.defaults, b.defaultJSON = map[int]columnDefault{}, map[string]string{}
		}
		b.defaultJSON[col] = d.json
		if !typed[col] {
			b.defaults[i] = d
		}
	}
}

// withDefaults returns values with each NULL that has a default replaced
// by it (a copy, only when there is one).
func (b *Bound) withDefaults(values [][]byte) [][]byte {
	copied := false
	for i, d := range b.defaults {
		if values[i] != nil {
			continue
		}
		if !copied {
			values, copied = append([][]byte(nil), values...), true
		}
		values[i] = d.value
	}
	return values
}

// EventID is the status row id of the event id in table: the first 16
// bytes of SHA-256 over the table's name, a zero byte and the id's text,
// marked as a version 8 UUID. outbox.event_id(table, id) computes the same.
func EventID(table, id string) [16]byte {
	var buf [256]byte
	in := append(append(append(buf[:0], table...), 0), id...)
	sum := sha256.Sum256(in)
	var u [16]byte
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u
}

// Record reads one inserted row, values in binary format. The row's id is
// read even when Record fails, so that the event can be recorded FAILED.
func (b *Bound) Record(values [][]byte, commitTime time.Time) (Record, error) {
	t := b.t
	var r Record
	if b.defaults != nil {
		values = b.withDefaults(values)
	}
	id, err := b.text(t.ID, values)
	if err != nil {
		return r, err
	}
	if id == nil {
		return r, fmt.Errorf("id column %s is NULL", t.ID)
	}
	r.ID, r.HasID = string(id), true
	r.Partition = -1
	if b.seq >= 0 {
		r.Seq, _ = integer(values[b.seq])
	}
	if r.Topic, err = b.topic(values); err != nil {
		return r, err
	}
	if r.Key, err = b.key(values); err != nil {
		return r, err
	}
	if r.Value, err = b.value(values); err != nil {
		return r, err
	}
	if err := b.headers(values, id, &r); err != nil {
		return r, err
	}
	if err := b.traceAndCloudEvents(values, &r); err != nil {
		return r, err
	}
	if t.Headers != "" {
		if v := values[b.idx[t.Headers]]; v != nil {
			r.HeadersJSON, _ = b.text(t.Headers, values)
		}
	}
	if t.EventType != "" {
		if r.EventType, err = b.text(t.EventType, values); err != nil {
			return r, err
		}
	}
	r.Timestamp = commitTime
	if t.Timestamp != "" {
		ts, ok, err := b.time(t.Timestamp, values)
		if err != nil {
			return r, err
		}
		if ok {
			r.Timestamp = ts
		}
	}
	return r, nil
}

// key reads the record's key: nil for no key column, or a NULL key outside
// Debezium's mode (which keeps a NULL key as a null value).
func (b *Bound) key(values [][]byte) ([]byte, error) {
	t := b.t
	if t.Key == "" {
		return nil, nil
	}
	text, err := b.text(t.Key, values)
	if err != nil {
		return nil, err
	}
	switch {
	case text != nil:
		return b.convert(t.Key, values, b.keyConv), nil
	case t.Debezium:
		return b.null(t.Key, b.keyConv), nil
	}
	return nil, nil
}

// headers adds the context headers, the id header (id is the id's text) and
// the columns placed as headers to r.Headers, and reads the column placed as
// the partition into r.Partition.
func (b *Bound) headers(values [][]byte, id []byte, r *Record) error {
	t := b.t
	// Room for the relay's own two headers too (kafka.Event.Placed).
	r.Headers = append(make([]Header, 0, len(t.ContextHeaders)+1+len(t.Placements)+2), t.ContextHeaders...)
	if t.IDHeader != "" {
		v := id
		if t.HeaderConverter == JSON {
			v = b.convert(t.ID, values, JSON)
		}
		r.Headers = append(r.Headers, Header{Key: b.idHeader, Value: v})
	}
	var err error
	for i, p := range t.Placements {
		if _, ok := b.idx[p.Column]; !ok {
			continue // table.field.additional.missing=ignore
		}
		if p.Partition {
			if t.Debezium && values[b.idx[p.Column]] == nil {
				continue // Debezium: no partition, the key's
			}
			if r.Partition, err = b.partition(p.Column, values); err != nil {
				return err
			}
			continue
		}
		if p.Envelope {
			continue
		}
		v, err := b.header(p.Column, values)
		if err != nil {
			return err
		}
		if v != nil || t.Debezium { // Debezium keeps a NULL as a header with a null value
			r.Headers = append(r.Headers, Header{Key: b.aliases[i], Value: v})
		}
	}
	return nil
}

// traceAndCloudEvents reads the trace context column into r's headers and
// the columns mapped to CloudEvents attributes into r.CE.
func (b *Bound) traceAndCloudEvents(values [][]byte, r *Record) error {
	t := b.t
	if b.trace >= 0 && values[b.trace] != nil {
		v, err := b.text(t.TraceContext, values)
		if err != nil {
			return err
		}
		r.Headers = append(r.Headers, traceHeaders(v)...)
	}
	for _, a := range t.CEAttributes {
		v, err := b.text(a.Column, values)
		if err != nil {
			return err
		}
		if v != nil {
			r.CE = append(r.CE, Header{Key: []byte(a.Name), Value: v})
		}
	}
	return nil
}

// topic fills the template and applies the regex. The topic of each
// template result is remembered (up to maxRoutes), so a row whose result
// was seen before costs a lookup: no string, no regex.
func (b *Bound) topic(values [][]byte) (string, error) {
	var arr [128]byte
	buf := arr[:0]
	for _, p := range b.parts {
		if !p.column {
			buf = append(buf, p.text...)
			continue
		}
		v, err := b.text(p.text, values)
		if err == nil && v == nil {
			err = fmt.Errorf("column %s, which names the topic, is NULL", p.text)
		}
		if err != nil {
			return "", err
		}
		buf = append(buf, v...)
	}
	if routed, ok := b.routes[string(buf)]; ok {
		return routed, nil
	}
	value := string(buf)
	topic := value
	if t := b.t; t.TopicRouter != nil {
		routed, err := t.TopicRouter.Route(value)
		if err != nil {
			return "", err
		}
		topic = routed
	}
	if topic == "" {
		return "", errors.New("the topic is empty")
	}
	if len(b.routes) < maxRoutes {
		b.routes[value] = topic
	}
	return topic, nil
}

// value is the record's value: the payload, in an envelope with placed
// columns when there are any, through the value converter.
func (b *Bound) value(values [][]byte) ([]byte, error) {
	t := b.t
	env := b.envelope
	conv := b.valueConv
	if len(env) > 0 {
		conv = JSON // the envelope's fields are written as JSON; with schemas, in a struct
	}
	var payload []byte
	switch v := values[b.idx[t.Payload]]; {
	case v == nil && !t.Debezium, t.TombstoneOnEmpty && b.blank(t.Payload, v):
		return nil, nil // a tombstone
	case v == nil:
		if len(env) == 0 {
			return b.null(t.Payload, b.valueConv), nil
		}
		payload = []byte("null")
	case t.ExpandJSON && (conv == JSON || conv == JSONSchema) && stringType(b.rel.Columns[b.idx[t.Payload]].TypeOID):
		text, err := b.text(t.Payload, values)
		if err != nil {
			return nil, err
		}
		expanded, schema, ok, err := expandJSONSchema(text, t.ExpandNulls)
		switch {
		case err != nil:
			return nil, fmt.Errorf("payload column %s (table.expand.json.payload): %w", t.Payload, err)
		case ok && conv == JSONSchema && schema != "":
			payload = append(append(append([]byte(`{"schema":`), schema...), `,"payload":`...), expanded...)
			payload = append(payload, '}')
		case ok && conv == JSON:
			payload = expanded
		default:
			payload = b.convert(t.Payload, values, conv)
		}
	default:
		payload = b.convert(t.Payload, values, conv)
	}
	if len(env) == 0 {
		return payload, nil
	}
	var buf bytes.Buffer
	if b.valueConv == JSONSchema {
		if err := b.envelopeSchema(&buf, values); err != nil {
			return nil, err
		}
		buf.WriteString(`,"payload":`)
	}
	buf.WriteString(`{"payload":`)
	buf.Write(payload)
	for _, p := range env {
		i, ok := b.idx[p.Column]
		if !ok {
			continue // table.field.additional.missing=ignore
		}
		buf.WriteByte(',')
		buf.Write(jsonString([]byte(p.Alias)))
		buf.WriteByte(':')
		if values[i] == nil {
			buf.WriteString("null")
		} else {
			buf.Write(b.convert(p.Column, values, JSON))
		}
	}
	buf.WriteByte('}')
	if b.valueConv == JSONSchema {
		buf.WriteByte('}')
	}
	return buf.Bytes(), nil
}

// envelopeSchema writes the start of JsonConverter's envelope of a value
// with envelope placements: {"schema": the struct of the payload and the
// placed fields, named <topic.prefix>.<schema>.<table>.<route value>.Value
// (Debezium's), versioned by the schema version column when set.
func (b *Bound) envelopeSchema(buf *bytes.Buffer, values [][]byte) error {
	t := b.t
	field := func(col, name string) {
		oid := b.rel.Columns[b.idx[col]].TypeOID
		s := schemaOf(oid, !b.notNull[col], b.defaultJSON[col])
		buf.WriteString(s[:len(s)-1])
		buf.WriteString(`,"field":`)
		buf.Write(jsonString([]byte(name)))
		buf.WriteByte('}')
	}
	buf.WriteString(`{"schema":{"type":"struct","fields":[`)
	field(t.Payload, "payload")
	for _, p := range b.envelope {
		if _, ok := b.idx[p.Column]; ok {
			buf.WriteByte(',')
			field(p.Column, p.Alias)
		}
	}
	route := ""
	if cols := templateColumns(t.Topic); len(cols) == 1 {
		v, err := b.text(cols[0], values)
		if err != nil {
			return err
		}
		route = string(v)
	}
	name := t.ConnectorName + "." + t.Schema + "." + t.Name + "." + route + ".Value"
	buf.WriteString(`],"optional":false,"name":`)
	buf.Write(jsonString([]byte(name)))
	if t.SchemaVersion != "" {
		if v := values[b.idx[t.SchemaVersion]]; v != nil {
			n, ok := integer(v)
			if !ok {
				return fmt.Errorf("column %s (table.field.event.schema.version) is not an integer", t.SchemaVersion)
			}
			buf.WriteString(`,"version":`)
			buf.WriteString(strconv.FormatInt(n, 10))
		}
	}
	buf.WriteByte('}')
	return nil
}

// header is a placed column's header value: its text (Debezium's
// SimpleHeaderConverter writes bytea as base64, timestamps as their Connect
// values), or its JSON with a JSON header converter; nil for NULL.
func (b *Bound) header(col string, values [][]byte) ([]byte, error) {
	v := values[b.idx[col]]
	if v == nil {
		return nil, nil
	}
	if b.t.HeaderConverter == JSON {
		return b.convert(col, values, JSON), nil
	}
	if b.rel.Columns[b.idx[col]].TypeOID == OIDBytea && b.t.Debezium {
		return []byte(base64.StdEncoding.EncodeToString(v)), nil
	}
	return b.text(col, values)
}

// null is a NULL column as conv serializes it: JsonConverter writes null
// (in its envelope with schemas), the others a Kafka null.
func (b *Bound) null(col string, conv Converter) []byte {
	switch conv {
	case JSON:
		return []byte("null")
	case JSONSchema:
		return []byte(`{"schema":` + schemaOf(b.rel.Columns[b.idx[col]].TypeOID, true, b.defaultJSON[col]) + `,"payload":null}`)
	}
	return nil
}

// blank reports whether v, a value of column col, is what Debezium's
// route.tombstone.on.empty.payload makes a tombstone: NULL, or text that is
// empty once Java's String.trim() removed its characters up to U+0020.
func (b *Bound) blank(col string, v []byte) bool {
	if v == nil {
		return true
	}
	switch b.rel.Columns[b.idx[col]].TypeOID {
	case OIDText, OIDVarchar, OIDBpchar, OIDName:
		for _, c := range v {
			if c > ' ' {
				return false
			}
		}
		return true
	}
	return false
}

// convert serializes a non-NULL column as conv does.
func (b *Bound) convert(col string, values [][]byte, conv Converter) []byte {
	i := b.idx[col]
	oid := b.rel.Columns[i].TypeOID
	v := values[i]
	text, _ := b.text(col, values)
	switch conv {
	case Raw, Bytes, String:
		if oid == OIDBytea {
			return v
		}
		return text
	case JSON:
		return jsonOf(oid, v, text)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"schema":`)
	buf.WriteString(schemaOf(oid, !b.notNull[col], b.defaultJSON[col]))
	buf.WriteString(`,"payload":`)
	buf.Write(jsonOf(oid, v, text))
	buf.WriteByte('}')
	return buf.Bytes()
}

// jsonOf is a column's JSON value as Kafka Connect's JsonConverter writes
// the type Debezium gives the column.
func jsonOf(oid uint32, v, text []byte) []byte {
	switch oid {
	case OIDInt2, OIDInt4, OIDInt8, OIDBool, OIDTimestamp:
		return text
	case OIDBytea:
		return jsonString([]byte(base64.StdEncoding.EncodeToString(v)))
	}
	return jsonString(text)
}

// stringType reports whether Debezium gives a column of type oid a string
// schema that table.expand.json.payload expands.
func stringType(oid uint32) bool {
	switch oid {
	case OIDText, OIDVarchar, OIDBpchar, OIDName, OIDJSON, OIDJSONB:
		return true
	}
	return false
}

// schemaOf is a column's Kafka Connect schema as JsonConverter writes it
// (type, optional, then name and version for Debezium's semantic types).
func schemaOf(oid uint32, optional bool, dflt string) string {
	typ, name := "string", ""
	switch oid {
	case OIDInt2:
		typ = "int16"
	case OIDInt4:
		typ = "int32"
	case OIDInt8:
		typ = "int64"
	case OIDBool:
		typ = "boolean"
	case OIDBytea:
		typ = "bytes"
	case OIDTimestamp:
		typ, name = "int64", "io.debezium.time.MicroTimestamp"
	case OIDTimestamptz:
		name = "io.debezium.time.ZonedTimestamp"
	case OIDUUID:
		name = "io.debezium.data.Uuid"
	case OIDJSON, OIDJSONB:
		name = "io.debezium.data.Json"
	}
	s := `{"type":"` + typ + `","optional":` + strconv.FormatBool(optional)
	if name != "" {
		s += `,"name":"` + name + `","version":1`
	}
	if dflt != "" {
		s += `,"default":` + dflt
	}
	return s + "}"
}

// jsonString encodes s as a JSON string as Jackson does: without escaping
// <, > and &; control characters as \uXXXX (upper-case hex) except \b \f
// \n \r \t; characters beyond U+FFFF as escaped UTF-16 surrogate pairs
// (\uD83D\uDE00); other characters raw.
func jsonString(s []byte) []byte {
	return AppendJSONString(make([]byte, 0, len(s)+len(s)/4+8), s)
}

// AppendJSONString appends s to buf as a JSON string (see jsonString).
// Invalid UTF-8 is kept as it is, as PostgreSQL text never holds any.
func AppendJSONString(buf, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	u := func(buf []byte, c rune) []byte {
		return append(buf, '\\', 'u', hex[c>>12&0xf], hex[c>>8&0xf], hex[c>>4&0xf], hex[c&0xf])
	}
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xf0 {
			continue
		}
		if c >= 0xf0 { // a 4-byte sequence: beyond U+FFFF
			r, size := utf8.DecodeRune(s[i:])
			if size != 4 {
				continue
			}
			buf = append(buf, s[start:i]...)
			hi, lo := utf16.EncodeRune(r)
			buf = u(u(buf, hi), lo)
			i += size - 1
			start = i + 1
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			buf = u(buf, rune(c))
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// text reads a column as text: nil for NULL.
func (b *Bound) text(col string, values [][]byte) ([]byte, error) {
	i := b.idx[col]
	v := values[i]
	if v == nil {
		return nil, nil
	}
	switch oid := b.rel.Columns[i].TypeOID; oid {
	case OIDText, OIDVarchar, OIDBpchar, OIDName, OIDJSON, OIDBytea:
		return v, nil
	case OIDJSONB:
		if len(v) == 0 || v[0] != 1 {
			return nil, fmt.Errorf("column %s: jsonb in an unknown binary format version", col)
		}
		return v[1:], nil
	case OIDUUID:
		if len(v) != 16 {
			return nil, fmt.Errorf("column %s: a uuid of %d bytes", col, len(v))
		}
		return formatUUID(v), nil
	case OIDInt2, OIDInt4, OIDInt8:
		n, ok := integer(v)
		if !ok {
			return nil, fmt.Errorf("column %s: an integer of %d bytes", col, len(v))
		}
		return strconv.AppendInt(nil, n, 10), nil
	case OIDBool:
		if len(v) != 1 {
			return nil, fmt.Errorf("column %s: a boolean of %d bytes", col, len(v))
		}
		return strconv.AppendBool(nil, v[0] != 0), nil
	case OIDTimestamptz, OIDTimestamp: // as Debezium gives them: ZonedTimestamp text, MicroTimestamp µs
		if len(v) != 8 {
			return nil, fmt.Errorf("column %s: a timestamp of %d bytes", col, len(v))
		}
		n := int64(binary.BigEndian.Uint64(v)) //nolint:gosec // signed
		ts, err := cdc.Timestamp(n)
		if err != nil {
			return nil, fmt.Errorf("column %s is infinite, which Debezium cannot read", col)
		}
		if oid == OIDTimestamp {
			return strconv.AppendInt(nil, ts.UnixMicro(), 10), nil
		}
		return ts.UTC().AppendFormat(nil, "2006-01-02T15:04:05.000000Z"), nil
	default:
		return nil, fmt.Errorf("column %s has type %s, which the relay cannot read", col, TypeName(oid))
	}
}

// partition reads a column placed as the partition: a non-negative integer.
func (b *Bound) partition(col string, values [][]byte) (int32, error) {
	v := values[b.idx[col]]
	if v == nil {
		return 0, fmt.Errorf("column %s, placed as the partition, is NULL", col)
	}
	n, ok := integer(v)
	if !ok || n < 0 || n > 1<<31-1 {
		return 0, fmt.Errorf("column %s, placed as the partition, is not a partition number", col)
	}
	return int32(n), nil
}

// time reads a timestamp column: timestamptz, timestamp (UTC) or bigint
// milliseconds since the epoch; ok is false for NULL or another type, and
// err says why a value cannot be a record's time (RecordTime).
func (b *Bound) time(col string, values [][]byte) (t time.Time, ok bool, err error) {
	i := b.idx[col]
	return RecordTime(col, b.rel.Columns[i].TypeOID, values[i])
}

// The times a record may carry. A Kafka record's timestamp is
// milliseconds since 1970 (brokers refuse a negative one, which means
// "none"); the producer writes a batch's timestamps as differences from
// its first, held in a time.Duration, which spans 292 years. Within
// 1970-01-01 and 2262-04-11 (the nanoseconds since 1970 an int64 holds)
// any two times of a batch differ by less, so an event's time never
// depends on its neighbours'.
var (
	MinRecordTime = time.Unix(0, 0).UTC()
	MaxRecordTime = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Millisecond)
)

// RecordTime reads column col's value v (binary: timestamptz, timestamp
// read as UTC, or bigint milliseconds since 1970) as a record's time. ok is
// false when v is NULL or of another type: the record keeps its commit
// time. err names the column and the value when Kafka cannot carry it:
// before 1970, after 9999, or infinite.
func RecordTime(col string, oid uint32, v []byte) (t time.Time, ok bool, err error) {
	if len(v) != 8 {
		return time.Time{}, false, nil
	}
	n := int64(binary.BigEndian.Uint64(v)) //nolint:gosec // a signed column
	switch oid {
	case OIDTimestamptz, OIDTimestamp:
		t, err = cdc.Timestamp(n)
		if err != nil {
			inf := "infinity"
			if n < 0 {
				inf = "-infinity"
			}
			return t, true, fmt.Errorf("column %s is %s, which a Kafka record's timestamp cannot carry", col, inf)
		}
	case OIDInt8:
		t = time.UnixMilli(n).UTC()
	default:
		return time.Time{}, false, nil
	}
	if t.Before(MinRecordTime) || t.After(MaxRecordTime) {
		return t, true, fmt.Errorf("column %s is %s, outside the times a Kafka record's timestamp can carry "+
			"(1970-01-01 to 2262-04-11 UTC)", col, t.Format("2006-01-02 15:04:05.999999Z07:00"))
	}
	return t, true, nil
}

func integer(v []byte) (int64, bool) {
	switch len(v) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(v))), true //nolint:gosec // two's complement
	case 4:
		return int64(int32(binary.BigEndian.Uint32(v))), true //nolint:gosec // two's complement
	case 8:
		return int64(binary.BigEndian.Uint64(v)), true //nolint:gosec // two's complement
	}
	return 0, false
}

func formatUUID(v []byte) []byte {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range v {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return out
}

// readable checks that a column of type oid can serve use.
func readable(u ColumnUse, oid uint32, t *Table) error {
	textual := map[uint32]bool{OIDText: true, OIDVarchar: true, OIDBpchar: true, OIDName: true, OIDUUID: true,
		OIDInt2: true, OIDInt4: true, OIDInt8: true, OIDBool: true, OIDJSON: true, OIDJSONB: true}
	var ok bool
	want := "text, varchar, uuid, an integer, boolean, json or jsonb"
	switch u.Use {
	case "id":
		ok, want = oid == OIDUUID || oid == OIDInt8 || oid == OIDInt4 || oid == OIDText || oid == OIDVarchar,
			"uuid, bigint, integer, text or varchar"
	case "payload", "key":
		conv := t.ValueConverter.For(oid, t.ValueDelegate)
		if u.Use == "key" {
			conv = t.KeyConverter.For(oid, t.KeyDelegate)
		}
		switch conv {
		case Bytes:
			ok, want = oid == OIDBytea, "bytea (the converter is ByteArrayConverter)"
		case String:
			ok = textual[oid]
			want += " (the converter is StringConverter)"
		default:
			ok, want = textual[oid] || oid == OIDBytea, want+" or bytea"
		}
	case "partition":
		ok, want = oid == OIDInt2 || oid == OIDInt4 || oid == OIDInt8, "smallint, integer or bigint"
		if t.Debezium { // Debezium reads it with Struct.getInt32
			ok, want = oid == OIDInt4, "integer (Debezium fails on any other type)"
		}
	case "timestamp":
		ok, want = oid == OIDTimestamptz || oid == OIDTimestamp || oid == OIDInt8,
			"timestamptz, timestamp or bigint (milliseconds since 1970)"
		if t.Debezium { // Debezium reads it with Struct.getInt64 and a Timestamp schema
			ok, want = oid == OIDTimestamp, "timestamp (Debezium fails on timestamptz, a string, and on bigint, without a timestamp schema)"
		}
	case "headers":
		ok, want = oid == OIDJSONB || oid == OIDJSON, "jsonb or json (an object of string values)"
	case "schema version":
		ok, want = oid == OIDInt2 || oid == OIDInt4 || oid == OIDInt8, "an integer"
	default: // event type, topic, placed columns
		ok = textual[oid]
		if t.Debezium && u.placement() { // Debezium's header and envelope placements take its types
			ok = ok || oid == OIDBytea || oid == OIDTimestamptz || oid == OIDTimestamp
			want += ", bytea, timestamptz or timestamp"
		}
		if t.Debezium && u.Use == "topic" { // Debezium reads it with Struct.getString: a string column
			ok, want = stringType(oid) || oid == OIDUUID, "text, varchar, uuid, json or jsonb (Debezium fails on any other type)"
		}
	}
	if !ok {
		return fmt.Errorf("column %q (%s) has type %s; the relay reads %s", u.Column, u.Use, TypeName(oid), want)
	}
	return nil
}
