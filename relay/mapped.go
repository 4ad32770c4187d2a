package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// filler turns an inserted row of one relation version into an event.
type filler interface {
	fill(e *event, values [][]byte, commitTime time.Time)
}

// layoutFor returns the filler of rel: outbox.events' own layout, or a
// mapped table's mapping bound to rel's columns.
func (r *Relay) layoutFor(rel *cdc.Relation) (filler, error) {
	for _, t := range r.cfg.Tables {
		if t.IsEvents() || t.Schema != rel.Namespace || t.Name != rel.Name {
			continue
		}
		b, err := t.Bind(rel)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
		}
		return &mappedLayout{source: t.QualifiedName(), bound: b, table: t, ce: r.ce}, nil
	}
	return newLayout(rel, r.ce)
}

// mappedLayout reads rows of a mapped table.
type mappedLayout struct {
	source string // schema.table
	bound  *mapping.Bound
	table  *mapping.Table
	ce     *ceWriter // nil: not CloudEvents
}

// fill makes e's record from the row through the mapping, and e.copy: the
// event's table and topic, which its status row carries, and the record,
// kept (keptCopy) if it is not delivered on its first try. A row that
// cannot be a record becomes INVALID_EVENT, its copy without a topic. The
// names of the headers it places were checked at start
// (Config.checkTableHeaders).
func (m *mappedLayout) fill(e *event, values [][]byte, commitTime time.Time) {
	rec, err := m.bound.Record(values, commitTime)
	id := rec.ID
	if !rec.HasID { // the id could not be read: this row's own place in the stream
		id = fmt.Sprintf("(no id: commit %X, position %d)", e.commitLSN, e.txPos)
	}
	e.id = mapping.EventID(m.source, id)
	c := &store.Copy{EventID: e.id, Source: m.source, SourceID: id, CreatedAt: commitTime, Partition: -1}
	e.copy = c
	if err == nil && rec.Key != nil && (!utf8.Valid(rec.Key) || bytes.IndexByte(rec.Key, 0) >= 0) {
		err = errors.New("the key is not UTF-8 text without NUL bytes, which per-key order needs")
	}
	if err == nil {
		err = e.Build(kafka.Event{ID: e.id, Topic: rec.Topic, Key: rec.Key, Value: rec.Value,
			Placed: rec.Headers, PlacedChecked: true, Headers: rec.HeadersJSON, EventType: rec.EventType, Timestamp: rec.Timestamp,
			Partition: rec.Partition, Partitioned: rec.Partition >= 0, CloudEvents: m.ce != nil, KeylessTombstone: m.table.Debezium})
	}
	if err == nil && m.ce != nil {
		e.ceAttrs = rec.CE
		err = m.ce.mappedEvent(e, m.table, m.source, rec.ID, rec.EventType, rec.Timestamp, rec.CE)
	}
	if err != nil {
		e.invalid = fmt.Sprintf("%s: %v", m.source, err)
		return
	}
	c.Topic, c.Key, c.Value, c.EventType, c.CreatedAt = rec.Topic, rec.Key, rec.Value, rec.EventType, rec.Timestamp
	c.Partition, c.Seq = rec.Partition, rec.Seq
	e.size = e.Size()
}

// keptCopy is e's record to keep (store.Copy) once it was not delivered on
// its first try: its headers are read from the message only then.
func (e *event) keptCopy() *store.Copy {
	c := e.copy
	if c.Topic != "" && c.Headers == nil {
		hs := e.Record.Headers
		if e.cloud { // the encoding's headers are made again from the copy
			hs = hs[:e.plain]
		}
		for _, h := range hs {
			if k := string(h.Key); k != kafka.HeaderEventID && k != kafka.HeaderEventType {
				if h.Value == nil { // a Debezium placed column that is NULL: a header with a null value
					k = nullHeaderPrefix + k
				}
				c.Headers = append(c.Headers, [2]string{k, string(h.Value)})
			}
		}
		for _, a := range e.ceAttrs {
			c.Headers = append(c.Headers, [2]string{ceAttributePrefix + string(a.Key), string(a.Value)})
		}
	}
	return c
}

// nullHeaderPrefix marks a kept record's header whose value is null (not
// empty), which the copy's [name, value] strings cannot say otherwise.
const nullHeaderPrefix = "\x01null\x01"

// fillFromCopy makes e's record from the copy kept of a mapped event (the
// poller's retries and resends: the row may be gone).
func fillFromCopy(e *event, id [16]byte, c *store.Copy, ce *ceWriter, t *mapping.Table) {
	*e = event{id: id, copy: c} // copy: counted by table
	var err error
	var attrs []mapping.Header
	switch {
	case c == nil:
		err = errors.New("the record of this mapped event is gone (its outbox.mapped_events row was purged)")
	case c.Topic == "":
		err = fmt.Errorf("%s id %s could not be mapped to a record when it was streamed; no record was kept", c.Source, c.SourceID)
	default:
		hs := make([]kafka.Header, 0, len(c.Headers))
		for _, h := range c.Headers {
			if name, ok := strings.CutPrefix(h[0], ceAttributePrefix); ok && ce != nil {
				attrs = append(attrs, mapping.Header{Key: []byte(name), Value: []byte(h[1])})
				continue
			}
			if name, ok := strings.CutPrefix(h[0], nullHeaderPrefix); ok {
				hs = append(hs, kafka.Header{Key: []byte(name)})
				continue
			}
			hs = append(hs, kafka.Header{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		err = e.Build(kafka.Event{ID: id, Topic: c.Topic, Key: c.Key, Value: c.Value, Placed: hs,
			EventType: c.EventType, Timestamp: c.CreatedAt, Partition: c.Partition, Partitioned: c.Partition >= 0,
			CloudEvents: ce != nil, KeylessTombstone: t != nil && t.Debezium})
	}
	if err == nil && ce != nil {
		e.ceAttrs = attrs
		err = ce.mappedEvent(e, t, c.Source, c.SourceID, c.EventType, c.CreatedAt, attrs)
	}
	if err != nil {
		e.invalid = err.Error()
		return
	}
	e.size = e.Size()
}

// checkTables checks the mapped tables against the database before a
// stream opens (the stream binds them with what it reads: NOT NULL columns).
// A mapping that does not fit is a setup error.
func (r *Relay) checkTables(ctx context.Context) error {
	if len(r.cfg.Tables) == 0 {
		return nil
	}
	err := r.store.CheckTables(ctx, r.cfg.Publication, r.cfg.Tables)
	var bad *mapping.BadConfig
	if !errors.As(err, &bad) {
		return err
	}
	// Tables missing from the publication only: add them, as the relay
	// creates the publication with them (the owner of the table may).
	if len(bad.Unpublished) == len(bad.Problems) {
		aerr := r.store.AddToPublication(ctx, r.cfg.Publication, bad.Unpublished)
		if aerr == nil {
			r.log.Info("added the mapped tables to the publication", zap.String("publication", r.cfg.Publication),
				zap.Strings("tables", bad.Unpublished))
			return r.store.CheckTables(ctx, r.cfg.Publication, r.cfg.Tables)
		}
		bad.Problems = append(bad.Problems, fmt.Sprintf("the relay could not add them itself: %v", aerr))
	}
	return fmt.Errorf("%w: %w", cdc.ErrSetup, err)
}

// checkPollTables checks the mapped tables for poll mode, which reads them
// rather than a stream: each needs its order columns.
func (r *Relay) checkPollTables(ctx context.Context) error {
	mapped := r.cfg.mapped()
	if len(mapped) == 0 {
		return nil
	}
	if err := r.store.CheckTables(ctx, "", mapped); err != nil {
		return fmt.Errorf("%w: %w", cdc.ErrSetup, err)
	}
	bad := &mapping.BadConfig{}
	for _, t := range mapped {
		if !t.Ordered() {
			bad.Problems = append(bad.Problems, fmt.Sprintf("%s: --mode poll reads table %s itself, which needs its order "+
				"columns %s and %s: add them with `outbox-relay migrate %s` (or apply what `migrate --print` shows)",
				t.Origin, t.QualifiedName(), mapping.OrderCreatedAt, mapping.OrderSeq, t.Origin))
		}
	}
	if len(bad.Problems) > 0 {
		return fmt.Errorf("%w: %w", cdc.ErrSetup, bad)
	}
	return nil
}

// warnUnbackfilled has the slot's creation say what it does not bring for
// mapped tables without order columns: the backfill reads those it can
// walk (mapped_walk.go), so rows already in the others, or written while
// the relay had no slot (before its first start, or after its slot was
// lost), are not relayed.
func (r *Relay) warnUnbackfilled(cfg *cdc.Config) {
	mapped := r.cfg.mapped()
	if len(mapped) == 0 {
		return
	}
	before := cfg.BeforeCreate
	cfg.BeforeCreate = func(ctx context.Context) error {
		var names []string
		for _, t := range mapped {
			if !t.Ordered() {
				names = append(names, t.QualifiedName())
			}
		}
		if len(names) > 0 {
			r.log.Warn("creating the slot: these mapped tables have no order columns, so they are relayed from this "+
				"moment on; rows already in them, and rows written while the relay had no slot, are not relayed "+
				"(`outbox-relay migrate` adds the columns; if the slot was lost, insert such events again, with "+
				"their ids: docs/own-table.md)",
				zap.String("slot", r.cfg.Slot), zap.Strings("tables", names))
		}
		if before != nil {
			return before(ctx)
		}
		return nil
	}
}
