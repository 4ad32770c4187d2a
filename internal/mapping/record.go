package mapping

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
)

// Header is one Kafka header a mapping places.
type Header struct {
	Name, Value []byte
}

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
	routes   map[string]string // route value -> topic through t.TopicRegex (few values, many rows)
}

// topicPart is literal text, or the value of the column it names.
type topicPart struct {
	text   string
	column bool
}

// maxRoutes bounds the route cache; past it routes are computed each time.
const maxRoutes = 4096

// Bind finds t's columns in rel. Check must have run: it read which columns
// are NOT NULL, for the JSON converter's schemas.
func (t *Table) Bind(rel *cdc.Relation) (*Bound, error) {
	b := &Bound{t: t, rel: rel, idx: map[string]int{}, seq: -1, trace: -1}
	if c := t.catalog.Load(); c != nil {
		b.notNull = c.notNull
	}
	if i := rel.ColumnIndex(OrderSeq); i >= 0 && rel.Columns[i].TypeOID == OIDInt8 {
		b.seq = i
	}
	for _, u := range t.Columns() {
		i := rel.ColumnIndex(u.Column)
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
	if t.TopicRegex != nil {
		b.routes = map[string]string{}
	}
	if t.IDHeader != "" {
		b.idHeader = []byte(t.IDHeader)
	}
	for _, p := range t.Placements {
		b.aliases = append(b.aliases, []byte(p.Alias))
		if p.Envelope {
			b.envelope = append(b.envelope, p)
		}
	}
	return b, nil
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
	if t.Key != "" {
		text, err := b.text(t.Key, values)
		if err != nil {
			return r, err
		}
		if text != nil {
			r.Key = b.convert(t.Key, values, t.KeyConverter, false)
		}
	}
	if r.Value, err = b.value(values); err != nil {
		return r, err
	}
	if t.IDHeader != "" {
		r.Headers = append(r.Headers, Header{Name: b.idHeader, Value: id})
	}
	for i, p := range t.Placements {
		if p.Partition {
			if r.Partition, err = b.partition(p.Column, values); err != nil {
				return r, err
			}
			continue
		}
		if p.Envelope {
			continue
		}
		v, err := b.text(p.Column, values)
		if err != nil {
			return r, err
		}
		if v != nil {
			r.Headers = append(r.Headers, Header{Name: b.aliases[i], Value: v})
		}
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
			r.CE = append(r.CE, Header{Name: []byte(a.Name), Value: v})
		}
	}
	return nil
}

// topic fills the template and applies the regex.
func (b *Bound) topic(values [][]byte) (string, error) {
	t := b.t
	var buf []byte
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
	topic := string(buf)
	if t.TopicRegex != nil {
		if routed, ok := b.routes[topic]; ok {
			return routed, nil
		}
		m := t.TopicRegex.FindStringSubmatchIndex(topic)
		if m == nil || m[0] != 0 || m[1] != len(topic) {
			return "", fmt.Errorf("route value %q does not match route.topic.regex %q", topic, t.TopicRegex)
		}
		routed := string(t.TopicRegex.ExpandString(nil, t.TopicReplacement, topic, m))
		if len(b.routes) < maxRoutes {
			b.routes[topic] = routed
		}
		topic = routed
	}
	if topic == "" {
		return "", errors.New("the topic is empty")
	}
	return topic, nil
}

// value is the record's value: the payload, in an envelope with placed
// columns when there are any, through the value converter.
func (b *Bound) value(values [][]byte) ([]byte, error) {
	t := b.t
	if values[b.idx[t.Payload]] == nil {
		return nil, nil // a tombstone
	}
	payload := b.convert(t.Payload, values, t.ValueConverter, t.ExpandJSON)
	if payload == nil { // jsonOf: not JSON, to be expanded
		return nil, fmt.Errorf("payload column %s is not valid JSON (table.expand.json.payload is on)", t.Payload)
	}
	env := b.envelope
	if len(env) == 0 {
		return payload, nil
	}
	var buf bytes.Buffer
	buf.WriteString(`{"payload":`)
	buf.Write(payload)
	for _, p := range env {
		buf.WriteByte(',')
		buf.Write(jsonString([]byte(p.Alias)))
		buf.WriteByte(':')
		if values[b.idx[p.Column]] == nil {
			buf.WriteString("null")
		} else {
			buf.Write(b.convert(p.Column, values, JSON, false))
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// convert serializes a non-NULL column as conv does.
func (b *Bound) convert(col string, values [][]byte, conv Converter, expand bool) []byte {
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
		return jsonOf(oid, v, text, expand)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"schema":`)
	buf.WriteString(schemaOf(oid, !b.notNull[col]))
	buf.WriteString(`,"payload":`)
	buf.Write(jsonOf(oid, v, text, false))
	buf.WriteByte('}')
	return buf.Bytes()
}

// jsonOf is a column's JSON value as Kafka Connect's JsonConverter writes
// the type Debezium gives the column.
func jsonOf(oid uint32, v, text []byte, expand bool) []byte {
	switch oid {
	case OIDInt2, OIDInt4, OIDInt8, OIDBool:
		return text
	case OIDBytea:
		return jsonString([]byte(base64.StdEncoding.EncodeToString(v)))
	case OIDJSON, OIDJSONB:
		if expand {
			var buf bytes.Buffer
			if json.Compact(&buf, text) != nil {
				return nil // not JSON: value says so
			}
			return buf.Bytes()
		}
	}
	return jsonString(text)
}

// schemaOf is a column's Kafka Connect schema as JsonConverter writes it
// (type, optional, then name and version for Debezium's semantic types).
func schemaOf(oid uint32, optional bool) string {
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
	case OIDUUID:
		name = "io.debezium.data.Uuid"
	case OIDJSON, OIDJSONB:
		name = "io.debezium.data.Json"
	}
	s := `{"type":"` + typ + `","optional":` + strconv.FormatBool(optional)
	if name != "" {
		s += `,"name":"` + name + `","version":1`
	}
	return s + "}"
}

// jsonString encodes s as a JSON string as Jackson does: without escaping
// <, > and &; control characters as \uXXXX except \b \f \n \r \t.
func jsonString(s []byte) []byte {
	return AppendJSONString(make([]byte, 0, len(s)+len(s)/4+8), s)
}

// AppendJSONString appends s to buf as a JSON string (see jsonString).
// Invalid UTF-8 is kept as it is, as PostgreSQL text never holds any.
func AppendJSONString(buf, s []byte) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
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
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
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
		conv := t.ValueConverter
		if u.Use == "key" {
			conv = t.KeyConverter
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
	case "timestamp":
		ok, want = oid == OIDTimestamptz || oid == OIDTimestamp || oid == OIDInt8,
			"timestamptz, timestamp or bigint (milliseconds since 1970)"
	case "headers":
		ok, want = oid == OIDJSONB || oid == OIDJSON, "jsonb or json (an object of string values)"
	default: // event type, topic, placed columns
		ok = textual[oid]
	}
	if !ok {
		return fmt.Errorf("column %q (%s) has type %s; the relay reads %s", u.Column, u.Use, TypeName(oid), want)
	}
	return nil
}
