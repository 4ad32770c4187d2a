package relay

import (
	"bytes"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// ceWriter writes events' records as CloudEvents (Config.CloudEvents);
// nil writes them as they are.
type ceWriter struct {
	cfg      cloudevents.Config
	database string // the database's name, for the default source
	// sources are the tables' sources, made once (every event's record
	// shares its table's); read-only once made.
	sources map[string][]byte
}

// The payloads' content types, shared by every record.
var (
	contentJSON  = []byte("application/json")
	contentText  = []byte("text/plain; charset=utf-8")
	contentBytes = []byte("application/octet-stream")
)

// newCEWriter returns cfg's writer for outbox.events and tables, nil when
// CloudEvents are off.
func newCEWriter(cfg cloudevents.Config, databaseURL string, tables []*mapping.Table) *ceWriter {
	if cfg.Mode == cloudevents.Off {
		return nil
	}
	w := &ceWriter{cfg: cfg, database: "postgres", sources: map[string][]byte{}}
	if pc, err := pgconn.ParseConfig(databaseURL); err == nil && pc.Database != "" {
		w.database = pc.Database
	}
	w.sources["outbox.events"] = w.makeSource(nil, "outbox.events")
	for _, t := range tables {
		w.sources[t.QualifiedName()] = w.makeSource(t, t.QualifiedName())
	}
	return w
}

// source is a table's CloudEvents source: its own, or the default.
func (w *ceWriter) source(t *mapping.Table, table string) []byte {
	if s, ok := w.sources[table]; ok {
		return s
	}
	return w.makeSource(t, table) // a kept record of a table no longer configured
}

func (w *ceWriter) makeSource(t *mapping.Table, table string) []byte {
	if t != nil && t.CESource != "" {
		return []byte(t.CESource)
	}
	return []byte(cloudevents.DefaultSource(w.database, table))
}

// encode writes e's record, as Build made it, as a CloudEvent; the
// headers before it stay in e.plain.
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
// created_at, its payload's content type (contentOf).
func (w *ceWriter) outboxEvent(e *event, typ []byte, at time.Time, contentType []byte) error {
	return w.encode(e, cloudevents.Event{ID: eventIDHeader(e), Source: w.source(nil, "outbox.events"), Type: typ, Time: at,
		ContentType: contentType})
}

// contentOf is the content type of a payload column of type oid: jsonb by
// default, or the type a user altered it to.
func contentOf(oid uint32) []byte {
	switch oid {
	case mapping.OIDBytea:
		return contentBytes
	case mapping.OIDJSON, mapping.OIDJSONB:
		return contentJSON
	}
	return contentText
}

// mappedEvent is a mapped table's row's CloudEvent: its id column's text,
// its event type and timestamp, the table's content type, and the
// columns mapped to attributes.
func (w *ceWriter) mappedEvent(e *event, t *mapping.Table, source, id string, typ []byte, at time.Time, attrs []mapping.Header) error {
	ev := cloudevents.Event{ID: []byte(id), Source: w.source(t, source), Type: typ, Time: at}
	if t != nil {
		switch t.ContentType() {
		case "application/json":
			ev.ContentType = contentJSON
		case "application/octet-stream":
			ev.ContentType = contentBytes
		case "":
		default:
			ev.ContentType = contentText
		}
	}
	for _, a := range attrs {
		ev.Attributes = append(ev.Attributes, cloudevents.Attribute{Name: string(a.Key), Value: a.Value})
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
