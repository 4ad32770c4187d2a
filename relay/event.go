package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// ErrBadTable marks an outbox.events table the relay cannot read at all
// (no id, topic or payload column, or an id that is not a uuid).
var ErrBadTable = errors.New("outbox.events cannot be relayed")

// layout says where each outbox column sits in one relation version. Columns
// are found by name, so added, dropped and reordered columns are fine.
type layout struct {
	id, topic, key, payload, headers, eventType, createdAt, maxAttempts int
	rel                                                                 *cdc.Relation
	ce                                                                  *ceWriter // nil: not CloudEvents
}

func newLayout(rel *cdc.Relation, ce *ceWriter) (*layout, error) {
	l := &layout{
		rel:       rel,
		ce:        ce,
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
	if l.maxAttempts >= 0 && rel.Columns[l.maxAttempts].TypeOID != mapping.OIDInt4 {
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
	if oid := rel.Columns[l.id].TypeOID; oid != mapping.OIDUUID {
		return nil, fmt.Errorf("%w: column id has type %s; it must be uuid", ErrBadTable, mapping.TypeName(oid))
	}
	return l, nil
}

// event is one outbox row on its way through the pipeline.
type event struct {
	kafka.Message
	id          [16]byte
	invalid     string // why the row cannot be a message; empty when it can
	skip        bool   // a status row exists already: someone else owns it
	size        int
	maxAttempts int32     // the event's own override, 0 for the policy's
	commitTime  time.Time // streamed events: their transaction's commit
	// at is the event's time when it is one a record can carry (its
	// created_at, else its commit time), zero otherwise; an unpublishable
	// event's dead letter carries it.
	at time.Time
	// Streamed events: the commit LSN of their transaction and their
	// position in it, kept in their row (after seq) for the poller's key
	// order.
	commitLSN uint64
	txPos     int32
	// copy is a mapped event's record, kept before its status row.
	copy *store.Copy
	// afterBackfill: e is queued behind the new slot's backfill (its key
	// has events the backfill has yet to give a row), so its row waits
	// until the backfill has finished (store.UntilBackfilled).
	afterBackfill bool
	// cloud: the record is a CloudEvent; its first plain headers are the
	// event's own (with the relay's), the rest the encoding's. ceAttrs are
	// a mapped event's CloudEvents attributes, kept with its record.
	cloud   bool
	plain   int
	ceAttrs []mapping.Header
}

// source is the table of e's status row as outbox.deliveries.source has
// it: "" for outbox.events, the mapped table for a mapped event.
func (e *event) source() string {
	if e.copy == nil {
		return ""
	}
	return e.copy.Source
}

// deferred reports whether e was not sent and is queued as a PENDING row:
// the stream routed it to the queue, or the publisher deferred it in a spill.
func (e *event) deferred() bool { return e.Outcome.Result == kafka.Deferred }

// unsent reports whether e is refused without being sent: it cannot be a
// message, or the publisher refused its topic before sending it.
func (e *event) unsent() bool { return e.invalid != "" || e.Outcome.Unsent }

// fill turns the inserted row into e's message, or sets e.invalid.
func (l *layout) fill(e *event, values [][]byte, commitTime time.Time) {
	copy(e.id[:], values[l.id])
	if l.maxAttempts >= 0 && len(values[l.maxAttempts]) == 4 {
		e.maxAttempts = int32(binary.BigEndian.Uint32(values[l.maxAttempts]))
	}
	if at, err := l.time(values, commitTime); err == nil {
		e.at = at
	}
	ev, err := l.read(values, commitTime)
	if err == nil {
		ev.ID = e.id
		err = e.Build(ev)
	}
	if err == nil && l.ce != nil {
		err = l.ce.outboxEvent(e, ev.EventType, ev.Timestamp, contentOf(l.rel.Columns[l.payload].TypeOID))
	}
	if err != nil {
		e.invalid = err.Error()
		return
	}
	e.size = e.Size()
}

// read decodes the row's columns into what Kafka needs.
func (l *layout) read(values [][]byte, commitTime time.Time) (ev kafka.Event, err error) {
	topic, err := l.text(l.topic, values)
	if err != nil {
		return ev, err
	}
	ev.Topic = string(topic)
	if l.key >= 0 && values[l.key] != nil {
		if ev.Key, err = l.text(l.key, values); err != nil {
			return ev, err
		}
	}
	if ev.Value, err = l.payloadBytes(values); err != nil {
		return ev, err
	}
	if l.headers >= 0 && values[l.headers] != nil {
		if ev.Headers, err = l.headersJSON(values[l.headers]); err != nil {
			return ev, err
		}
	}
	if l.eventType >= 0 && values[l.eventType] != nil {
		if ev.EventType, err = l.text(l.eventType, values); err != nil {
			return ev, err
		}
	}
	ev.CloudEvents = l.ce != nil
	ev.Timestamp, err = l.time(values, commitTime)
	return ev, err
}

// time is the record's time: the created_at column's when set, else the
// commit's; an error when created_at is a time no record can carry.
func (l *layout) time(values [][]byte, commitTime time.Time) (time.Time, error) {
	if l.createdAt >= 0 {
		c := l.rel.Columns[l.createdAt]
		if c.TypeOID == mapping.OIDTimestamptz || c.TypeOID == mapping.OIDTimestamp {
			t, ok, err := mapping.RecordTime(c.Name, c.TypeOID, values[l.createdAt])
			if err != nil || ok {
				return t, err
			}
		}
	}
	return commitTime, nil
}

// text reads a text-like column.
func (l *layout) text(i int, values [][]byte) ([]byte, error) {
	c := l.rel.Columns[i]
	switch c.TypeOID {
	case mapping.OIDText, mapping.OIDVarchar, mapping.OIDBpchar:
		return values[i], nil
	}
	return nil, fmt.Errorf("column %s has type %s; the relay reads it as text, varchar or char", c.Name, mapping.TypeName(c.TypeOID))
}

// payloadBytes returns the value bytes: bytea, text and json byte-exact, jsonb in
// PostgreSQL's text form, nil for NULL (a tombstone).
func (l *layout) payloadBytes(values [][]byte) ([]byte, error) {
	v := values[l.payload]
	if v == nil {
		return nil, nil // a tombstone
	}
	switch oid := l.rel.Columns[l.payload].TypeOID; oid {
	case mapping.OIDJSONB:
		return jsonbText(v)
	case mapping.OIDBytea, mapping.OIDText, mapping.OIDVarchar, mapping.OIDBpchar, mapping.OIDJSON:
		return v, nil
	default:
		return nil, fmt.Errorf("payload has type %s; the relay publishes jsonb, json, bytea and text payloads", mapping.TypeName(oid))
	}
}

// jsonbText strips jsonb's binary format version byte.
func jsonbText(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != 1 {
		return nil, errors.New("jsonb value in an unknown binary format version")
	}
	return v[1:], nil
}

// headersJSON returns the headers column as JSON text.
func (l *layout) headersJSON(v []byte) ([]byte, error) {
	switch oid := l.rel.Columns[l.headers].TypeOID; oid {
	case mapping.OIDJSONB:
		v, err := jsonbText(v)
		if err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		return v, nil
	case mapping.OIDJSON, mapping.OIDText, mapping.OIDVarchar:
		return v, nil
	default:
		return nil, fmt.Errorf("headers has type %s; it must be jsonb or json", mapping.TypeName(oid))
	}
}
