package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// Kafka headers the relay adds to every message.
const (
	HeaderEventID   = "outbox-event-id"
	HeaderEventType = "outbox-event-type"
)

// reservedHeaders are the header names the relay writes, as patterns (a
// trailing * is any suffix): an event's own header by one of these names
// would reach consumers as a second copy before the relay's, and a
// consumer reading the first would believe the writer. cloudEventsHeaders
// are reserved too when records are CloudEvents. Names are compared
// without regard to case, as some consumers read them.
var (
	reservedHeaders    = []string{"outbox-event-*", "outbox-dlt-*", "__connect.errors.*"}
	cloudEventsHeaders = []string{"ce_*", "content-type"}
)

// ReservedHeader returns an error when an event may not have a header
// named name because the relay writes headers by that name (in CloudEvents
// mode too, when cloudEvents is set); nil otherwise.
func ReservedHeader(name string, cloudEvents bool) error {
	if p := reservedBy(name, cloudEvents); p != "" {
		return fmt.Errorf("%q is reserved for the relay, which writes the %s headers", name, p)
	}
	return nil
}

// reservedBy returns the reserved pattern name matches, "" for none. It
// keeps no reference to name, so that a caller's string([]byte) conversion
// is not copied to the heap on every record.
func reservedBy(name string, cloudEvents bool) string {
	for _, p := range reservedHeaders {
		if matchHeader(p, name) {
			return p
		}
	}
	if cloudEvents {
		for _, p := range cloudEventsHeaders {
			if matchHeader(p, name) {
				return p
			}
		}
	}
	return ""
}

// matchHeader reports whether name matches pattern, without regard to case.
func matchHeader(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix)
	}
	return strings.EqualFold(name, pattern)
}

// Event is an outbox row as Kafka needs it. The byte slices may alias the
// row's buffers; they must stay unchanged until the message's outcome.
type Event struct {
	ID    [16]byte
	Topic string
	Key   []byte // nil: no key
	Value []byte // nil: a tombstone (a null value), which needs a key
	// Placed are headers placed first, in order (a mapped table's id
	// header and placed columns). The record's headers are Placed with the
	// others appended: a slice of the event's own, with room for two more,
	// saves a copy.
	Placed []Header
	// Headers is a JSON object of string values (the headers column's text),
	// or nil.
	Headers   []byte
	EventType []byte // nil: no outbox-event-type header
	Timestamp time.Time
	// Partition, when Partitioned, is the record's partition: a mapped
	// table's column placed as the partition. Otherwise the partitioner
	// places the record by its key.
	Partition   int32
	Partitioned bool
	// CloudEvents: the record becomes a CloudEvent, whose headers (ce_*,
	// content-type) are reserved too (ReservedHeader).
	CloudEvents bool
	// PlacedChecked: Placed's names were checked against ReservedHeader
	// before (a mapped table's names, at start), so Build does not check
	// them again for every record.
	PlacedChecked bool
	// KeylessTombstone allows a tombstone without a key, as Debezium
	// produces one (a compacted topic refuses it).
	KeylessTombstone bool
}

// Header is one record header (sarama's); the slices may alias the row's
// buffers.
type Header = sarama.RecordHeader

// Message is one record on its way to Kafka and, once it is reported done,
// its outcome.
type Message struct {
	Record  sarama.ProducerMessage
	Outcome Outcome

	to    Receiver
	seq   uint64 // the order Publish was given it in; resends keep it
	alone bool   // resent by itself after a broker rejected its batch as too large
	// given: Defer gave it the outcome Deferred while sarama still had it;
	// whatever sarama says of it later is not reported.
	given      bool
	prev, next *Message // in the publisher's flight list
	// partition is the partition a mapped table placed; -1: none.
	partition int32
	// deadLetter: made by DeadLetter, for the dead-letter topic.
	deadLetter bool
}

// The relay's header names as record header keys, made once: sarama only
// reads them.
var (
	keyEventID   = []byte(HeaderEventID)
	keyEventType = []byte(HeaderEventType)
)

// Key is the record's key as Build set it, or nil when it has none.
func (m *Message) Key() []byte {
	k, _ := m.Record.Key.(sarama.ByteEncoder)
	return k
}

// Build makes m's record from ev, or says why ev cannot be a message.
func (m *Message) Build(ev Event) error {
	*m = Message{}
	r := &m.Record
	if len(ev.Topic) == 0 {
		return errors.New("topic is NULL or empty")
	}
	r.Topic = ev.Topic
	if ev.Key != nil {
		r.Key = sarama.ByteEncoder(ev.Key)
	}
	if ev.Value != nil {
		r.Value = sarama.ByteEncoder(ev.Value)
	} else if ev.Key == nil && !ev.KeylessTombstone {
		return errors.New("a tombstone needs a key: payload and key are both NULL")
	}
	if ev.Headers != nil {
		var err error
		// userHeaders leaves room for the relay's two.
		if r.Headers, err = userHeaders(ev.Headers, ev.CloudEvents); err != nil {
			return err
		}
	} else if ev.Placed == nil {
		r.Headers = make([]sarama.RecordHeader, 0, 2)
	}
	if ev.Placed != nil {
		for _, h := range ev.Placed {
			if !ev.PlacedChecked && reservedBy(string(h.Key), ev.CloudEvents) != "" {
				return fmt.Errorf("header %w", ReservedHeader(string(h.Key), ev.CloudEvents))
			}
		}
		r.Headers = append(ev.Placed, r.Headers...)
	}
	r.Headers = append(r.Headers, sarama.RecordHeader{Key: keyEventID, Value: FormatUUID(ev.ID)})
	if ev.EventType != nil {
		r.Headers = append(r.Headers, sarama.RecordHeader{Key: keyEventType, Value: ev.EventType})
	}
	r.Timestamp = ev.Timestamp
	m.partition = -1
	if ev.Partitioned {
		m.partition = ev.Partition
	}
	return nil
}

// DeadLetter makes m the dead letter of an event on topic: from's record
// (key, value, headers, timestamp) with extra headers after its own, placed
// by its key; or, when no record could be made of the event (from nil),
// key and value as they are, with the event's id header and timestamp at.
func (m *Message) DeadLetter(from *Message, topic string, id [16]byte, key, value []byte, at time.Time, extra []Header) {
	*m = Message{partition: -1, deadLetter: true}
	r := &m.Record
	r.Topic = topic
	var own []sarama.RecordHeader
	if from != nil {
		r.Key, r.Value, r.Timestamp, own = from.Record.Key, from.Record.Value, from.Record.Timestamp, from.Record.Headers
	} else {
		if key != nil {
			r.Key = sarama.ByteEncoder(key)
		}
		if value != nil {
			r.Value = sarama.ByteEncoder(value)
		}
		r.Timestamp = at
		own = []sarama.RecordHeader{{Key: keyEventID, Value: FormatUUID(id)}}
	}
	r.Headers = make([]sarama.RecordHeader, 0, len(own)+len(extra))
	r.Headers = append(r.Headers, own...)
	for _, h := range extra {
		r.Headers = append(r.Headers, sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
}

// Size is the record's size as the producer counts it against its limits.
func (m *Message) Size() int { return m.Record.ByteSize(2) }

// userHeaders parses the headers column: a JSON object of string to
// string, of names the relay does not write.
func userHeaders(v []byte, cloudEvents bool) ([]sarama.RecordHeader, error) {
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
		if err := ReservedHeader(k, cloudEvents); err != nil {
			return nil, fmt.Errorf("headers: %w", err)
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

// FormatUUID renders a uuid in its canonical text form.
func FormatUUID(id [16]byte) []byte {
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
