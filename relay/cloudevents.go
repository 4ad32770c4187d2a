package relay

import (
	"bytes"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// ceWriter writes events' records as CloudEvents (Config.CloudEvents);
// nil writes them as they are.
type ceWriter struct {
	cfg      cloudevents.Config
	database string // the database's name, for the default source
}

// newCEWriter returns cfg's writer, nil when CloudEvents are off.
func newCEWriter(cfg cloudevents.Config, databaseURL string) *ceWriter {
	if cfg.Mode == cloudevents.Off {
		return nil
	}
	w := &ceWriter{cfg: cfg, database: "postgres"}
	if pc, err := pgconn.ParseConfig(databaseURL); err == nil && pc.Database != "" {
		w.database = pc.Database
	}
	return w
}

// source is a table's CloudEvents source: its own, or the default.
func (w *ceWriter) source(t *mapping.Table, table string) string {
	if t != nil && t.CESource != "" {
		return t.CESource
	}
	return cloudevents.DefaultSource(w.database, table)
}

// encode writes e's record, as Build made it, as a CloudEvent; the
// headers before it stay in e.plain. id is the event's id as text.
func (w *ceWriter) encode(e *event, ev cloudevents.Event) error {
	e.plain = len(e.Record.Headers)
	e.cloud = true
	return w.cfg.Encode(&e.Record, ev)
}

// eventIDHeader is the record's outbox-event-id header's value: the
// event's id as text, without formatting it again.
func eventIDHeader(e *event) []byte {
	for i := len(e.Record.Headers) - 1; i >= 0; i-- {
		if h := e.Record.Headers[i]; bytes.Equal(h.Key, []byte(kafka.HeaderEventID)) {
			return h.Value
		}
	}
	return kafka.FormatUUID(e.id)
}

// outboxEvent is an outbox.events row's CloudEvent: its id, its type, its
// created_at, a JSON payload.
func (w *ceWriter) outboxEvent(e *event, typ []byte, at time.Time) error {
	return w.encode(e, cloudevents.Event{ID: eventIDHeader(e), Source: w.source(nil, "outbox.events"), Type: typ, Time: at,
		ContentType: "application/json"})
}

// mappedEvent is a mapped table's row's CloudEvent: its id column's text,
// its event type and timestamp, the table's content type, and the
// columns mapped to attributes.
func (w *ceWriter) mappedEvent(e *event, t *mapping.Table, source, id string, typ []byte, at time.Time, attrs []mapping.Header) error {
	ev := cloudevents.Event{ID: []byte(id), Source: w.source(t, source), Type: typ, Time: at}
	if t != nil {
		ev.ContentType = t.ContentType()
	}
	for _, a := range attrs {
		ev.Attributes = append(ev.Attributes, cloudevents.Attribute{Name: string(a.Name), Value: a.Value})
	}
	return w.encode(e, ev)
}

// ceAttributePrefix marks a kept record's header that holds a CloudEvents
// attribute (its binary mode's header name).
const ceAttributePrefix = "ce_"

// tableNamed is the mapped table a kept record came from, nil when none
// is configured by that name any more.
func tableNamed(tables []*mapping.Table, c *store.Copy) *mapping.Table {
	if c == nil {
		return nil
	}
	for _, t := range tables {
		if t.QualifiedName() == c.Source {
			return t
		}
	}
	return nil
}
