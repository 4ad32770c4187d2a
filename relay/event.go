package relay

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/outbox-relay/outbox-relay/cdc"
)

// Kafka headers the relay adds to every message.
const (
	HeaderEventID   = "outbox-event-id"
	HeaderEventType = "outbox-event-type"
)

// PostgreSQL type OIDs the relay reads.
const (
	oidBytea       = 17
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
)

// ErrBadTable marks an outbox.events table the relay cannot read at all
// (no id, topic or payload column, or an id that is not a uuid).
var ErrBadTable = errors.New("outbox.events cannot be relayed")

// layout says where each outbox column sits in one relation version. Columns
// are found by name, so added, dropped and reordered columns are fine.
type layout struct {
	id, topic, key, payload, headers, eventType, createdAt, maxAttempts int
	rel                                                                 *cdc.Relation
}

func newLayout(rel *cdc.Relation) (*layout, error) {
	l := &layout{
		rel:       rel,
		id:        rel.ColumnIndex("id"),
		topic:     rel.ColumnIndex("topic"),
		key:       rel.ColumnIndex("key"),
		payload:   rel.ColumnIndex("payload"),
		headers:   rel.ColumnIndex("headers"),
		eventType: rel.ColumnIndex("event_type"),
		createdAt: rel.ColumnIndex("created_at"),
		// maxAttempts overrides the retry policy for one event (migration 2).
		maxAttempts: rel.ColumnIndex("max_attempts"),
	}
	if l.maxAttempts >= 0 && rel.Columns[l.maxAttempts].TypeOID != oidInt4 {
		l.maxAttempts = -1
	}
	if rel.Namespace != "outbox" || rel.Name != "events" {
		return nil, fmt.Errorf("%w: the publication streams %s.%s; it must publish outbox.events only", ErrBadTable, rel.Namespace, rel.Name)
	}
	for name, i := range map[string]int{"id": l.id, "topic": l.topic, "payload": l.payload} {
		if i < 0 {
			return nil, fmt.Errorf("%w: column %q is missing", ErrBadTable, name)
		}
	}
	if oid := rel.Columns[l.id].TypeOID; oid != oidUUID {
		return nil, fmt.Errorf("%w: column id has type %s; it must be uuid", ErrBadTable, typeName(oid))
	}
	return l, nil
}

// event is one outbox row on its way through the pipeline.
type event struct {
	seq         uint64
	id          [16]byte
	invalid     string // why the row cannot be a message; empty when it can
	skip        bool   // a status row exists already: someone else owns it
	size        int
	maxAttempts int32 // the event's own override, 0 for the policy's
	alone       bool  // resent by itself after a broker rejected its batch as too large
	msg         sarama.ProducerMessage
	batch       *batch
	res         result
}

// result is what the status row will say.
type result struct {
	status    Status
	reason    string
	lastError string
	attempts  int32
	partition int32
	offset    int64
	delay     time.Duration // PENDING: wait before the next attempt
}

// fill turns the inserted row into e.msg, or sets e.invalid. The batch
// links messages to events when it is sealed.
func (l *layout) fill(e *event, values [][]byte, commitTime time.Time) {
	copy(e.id[:], values[l.id])
	if l.maxAttempts >= 0 && len(values[l.maxAttempts]) == 4 {
		e.maxAttempts = int32(binary.BigEndian.Uint32(values[l.maxAttempts]))
	}
	e.msg = sarama.ProducerMessage{}
	if err := l.build(&e.msg, values, e.id, commitTime); err != nil {
		e.invalid = err.Error()
		return
	}
	e.size = e.msg.ByteSize(2)
}

func (l *layout) build(m *sarama.ProducerMessage, values [][]byte, id [16]byte, commitTime time.Time) error {
	topic, err := l.text(l.topic, values)
	if err != nil {
		return err
	}
	if len(topic) == 0 {
		return errors.New("topic is NULL or empty")
	}
	m.Topic = string(topic)

	if l.key >= 0 && values[l.key] != nil {
		key, err := l.text(l.key, values)
		if err != nil {
			return err
		}
		m.Key = sarama.ByteEncoder(key)
	}

	payload, err := l.payloadBytes(values)
	if err != nil {
		return err
	}
	m.Value = sarama.ByteEncoder(payload)

	if l.headers >= 0 && values[l.headers] != nil {
		// userHeaders leaves room for the relay's two.
		if m.Headers, err = l.userHeaders(values[l.headers], l.rel.Columns[l.headers].TypeOID); err != nil {
			return err
		}
	} else {
		m.Headers = make([]sarama.RecordHeader, 0, 2)
	}
	m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(HeaderEventID), Value: formatUUID(id)})
	if l.eventType >= 0 && values[l.eventType] != nil {
		et, err := l.text(l.eventType, values)
		if err != nil {
			return err
		}
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(HeaderEventType), Value: et})
	}

	m.Timestamp = commitTime
	if l.createdAt >= 0 && values[l.createdAt] != nil {
		switch oid := l.rel.Columns[l.createdAt].TypeOID; oid {
		case oidTimestamptz, oidTimestamp:
			if v := values[l.createdAt]; len(v) == 8 {
				m.Timestamp = cdc.PgTime(int64(binary.BigEndian.Uint64(v)))
			}
		}
	}
	return nil
}

// text reads a text-like column.
func (l *layout) text(i int, values [][]byte) ([]byte, error) {
	c := l.rel.Columns[i]
	switch c.TypeOID {
	case oidText, oidVarchar, oidBpchar:
		return values[i], nil
	}
	return nil, fmt.Errorf("column %s has type %s; the relay reads it as text, varchar or char", c.Name, typeName(c.TypeOID))
}

// payloadBytes returns the value bytes: bytea, text and json byte-exact, jsonb in
// PostgreSQL's text form.
func (l *layout) payloadBytes(values [][]byte) ([]byte, error) {
	v := values[l.payload]
	if v == nil {
		return nil, errors.New("payload is NULL")
	}
	switch oid := l.rel.Columns[l.payload].TypeOID; oid {
	case oidJSONB:
		return jsonbText(v)
	case oidBytea, oidText, oidVarchar, oidBpchar, oidJSON:
		return v, nil
	default:
		return nil, fmt.Errorf("payload has type %s; the relay publishes jsonb, json, bytea and text payloads", typeName(oid))
	}
}

// jsonbText strips jsonb's binary format version byte.
func jsonbText(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != 1 {
		return nil, errors.New("jsonb value in an unknown binary format version")
	}
	return v[1:], nil
}

// userHeaders parses the headers column: a JSON object of string to string.
func (l *layout) userHeaders(v []byte, oid uint32) ([]sarama.RecordHeader, error) {
	var err error
	switch oid {
	case oidJSONB:
		if v, err = jsonbText(v); err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
	case oidJSON, oidText, oidVarchar:
	default:
		return nil, fmt.Errorf("headers has type %s; it must be jsonb or json", typeName(oid))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		return nil, fmt.Errorf("headers must be a JSON object of string values: %s", describeJSON(v))
	}
	if obj == nil {
		return nil, errors.New("headers must be a JSON object of string values, not null")
	}
	hs := make([]sarama.RecordHeader, 0, len(obj)+2)
	for k, raw := range obj {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("headers: value of %q is %s, want a string", k, describeJSON(raw))
		}
		if k == HeaderEventID || k == HeaderEventType {
			return nil, fmt.Errorf("headers: %q is reserved for the relay", k)
		}
		hs = append(hs, sarama.RecordHeader{Key: []byte(k), Value: []byte(s)})
	}
	return hs, nil
}

// describeJSON names the kind of a JSON value for an error message.
func describeJSON(v []byte) string {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return "an object"
		case '[':
			return "an array"
		case '"':
			return "a string"
		case 't', 'f':
			return "a boolean"
		case 'n':
			return "null"
		default:
			return "a number"
		}
	}
	return "empty"
}

// typeName names the common built-in types for error messages.
func typeName(oid uint32) string {
	names := map[uint32]string{
		16: "boolean", 20: "bigint", 21: "smallint", 23: "integer", 142: "xml", 700: "real",
		701: "double precision", 1700: "numeric", oidUUID: "uuid", oidTimestamptz: "timestamptz",
		oidTimestamp: "timestamp", oidBytea: "bytea", oidText: "text", oidJSON: "json", oidJSONB: "jsonb",
	}
	if n, ok := names[oid]; ok {
		return fmt.Sprintf("%s (oid %d)", n, oid)
	}
	return fmt.Sprintf("oid %d", oid)
}

// formatUUID renders a uuid in its canonical text form.
func formatUUID(id [16]byte) []byte {
	const hex = "0123456789abcdef"
	out := make([]byte, 36)
	j := 0
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hex[b>>4], hex[b&0xf]
		j += 2
	}
	return out
}
