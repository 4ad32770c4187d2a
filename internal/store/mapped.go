package store

import (
	"context"
	_ "embed" // the statements
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/mapping"
)

var (
	//go:embed sql/insert_copies.sql
	insertCopiesSQL string
	//go:embed sql/copies.sql
	copiesSQL string

	// The outcome statements for batches with mapped events: their events
	// are read through outbox.relayed_events, which adds the copies to
	// outbox.events. Batches of outbox.events alone keep the plain ones.
	insertOutcomesMappedSQL = relayedEvents(insertOutcomesSQL)
	insertSentMappedSQL     = relayedEvents(insertSentSQL)
)

func relayedEvents(sql string) string {
	const from = "FROM outbox.events e WHERE e.id = u.id"
	if !strings.Contains(sql, from) {
		panic("store: an outcome statement no longer reads its event " + from)
	}
	return strings.ReplaceAll(sql, from, "FROM outbox.relayed_events e WHERE e.id = u.id")
}

// Copy is the record a mapped table's row became, kept in
// outbox.mapped_events so that it can be retried and resent once the row
// is gone.
type Copy struct {
	EventID  [16]byte
	Source   string // schema.table
	SourceID string // the id column's text
	Topic    string // "": the row could not be mapped
	Key      []byte // the key column's text (per-key order); nil: none
	KafkaKey []byte
	Value    []byte // nil: a tombstone
	// Headers are the record's headers in order, as name and value.
	Headers   [][2]string
	EventType []byte
	CreatedAt time.Time
}

// copies is a batch of Copy in column form, as insert_copies.sql takes it.
type copies struct {
	ids                        [][16]byte
	sources, sourceIDs         []string
	topics, keys, eventTypes   []*string
	kafkaKeys, values, headers [][]byte
	createdAt                  []time.Time
}

// AddCopy adds the record of a mapped event; InsertOutcomes keeps it before
// writing the status rows.
func (o *Outcomes) AddCopy(c Copy) {
	k := &o.copies
	k.ids = append(k.ids, c.EventID)
	k.sources = append(k.sources, c.Source)
	k.sourceIDs = append(k.sourceIDs, c.SourceID)
	k.topics = append(k.topics, optional([]byte(c.Topic)))
	k.keys = append(k.keys, optional(c.Key))
	k.eventTypes = append(k.eventTypes, optional(c.EventType))
	k.kafkaKeys = append(k.kafkaKeys, c.KafkaKey)
	k.values = append(k.values, c.Value)
	h := []byte{'['}
	for i, kv := range c.Headers {
		if i > 0 {
			h = append(h, ',')
		}
		h = append(mapping.AppendJSONString(append(mapping.AppendJSONString(append(h, '['), []byte(kv[0])), ','), []byte(kv[1])), ']')
	}
	k.headers = append(k.headers, append(h, ']'))
	k.createdAt = append(k.createdAt, c.CreatedAt)
}

func optional(b []byte) *string {
	if b == nil || len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func (k *copies) reset() {
	*k = copies{ids: k.ids[:0], sources: k.sources[:0], sourceIDs: k.sourceIDs[:0], topics: k.topics[:0],
		keys: k.keys[:0], eventTypes: k.eventTypes[:0], kafkaKeys: k.kafkaKeys[:0], values: k.values[:0],
		headers: k.headers[:0], createdAt: k.createdAt[:0]}
}

// queueCopies adds the statement that keeps o's copies to batch.
func queueCopies(batch *pgx.Batch, o *Outcomes) {
	k := &o.copies
	headers := make([]string, len(k.headers))
	for i, h := range k.headers {
		headers[i] = string(h)
	}
	batch.Queue(insertCopiesSQL, k.ids, k.sources, k.sourceIDs, k.topics, k.keys, k.kafkaKeys, k.values, headers,
		k.eventTypes, k.createdAt)
}

// insertWithCopies runs an outcome statement after the statement that keeps
// o's copies, in one round trip and one transaction (a pgx batch ends with
// one Sync): the status rows never exist without their copies.
func (s *Store) insertWithCopies(ctx context.Context, o *Outcomes, sql string, args ...any) (visible int, err error) {
	batch := &pgx.Batch{}
	queueCopies(batch, o)
	batch.Queue(sql, args...)
	res := s.status.SendBatch(ctx, batch)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return 0, fmt.Errorf("keeping %d mapped events: %w", len(o.copies.ids), err)
	}
	err = res.QueryRow().Scan(&visible)
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	return visible, err
}

// Copies reads the kept records of mapped events, by event id.
func (s *Store) Copies(ctx context.Context, ids [][16]byte) (map[[16]byte]Copy, error) {
	rows, err := s.db.Query(ctx, copiesSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("reading mapped events: %w", err)
	}
	defer rows.Close()
	out := make(map[[16]byte]Copy, len(ids))
	for rows.Next() {
		var c Copy
		var topic, eventType *string
		var headers []byte
		if err := rows.Scan(&c.EventID, &c.Source, &c.SourceID, &topic, &c.KafkaKey, &c.Value, &headers, &eventType,
			&c.CreatedAt); err != nil {
			return nil, fmt.Errorf("reading mapped events: %w", err)
		}
		if topic != nil {
			c.Topic = *topic
		}
		if eventType != nil {
			c.EventType = []byte(*eventType)
		}
		if err := json.Unmarshal(headers, &c.Headers); err != nil {
			return nil, fmt.Errorf("reading mapped event headers: %w", err)
		}
		out[c.EventID] = c
	}
	return out, rows.Err()
}

// CheckTables checks the mapped tables against the catalog and publication
// (mapping.Check).
func (s *Store) CheckTables(ctx context.Context, publication string, tables []*mapping.Table) error {
	return mapping.Check(ctx, s.db, publication, tables)
}

// AddToPublication adds tables (quoted names) to publication.
func (s *Store) AddToPublication(ctx context.Context, publication string, tables []string) error {
	sql := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", pgx.Identifier{publication}.Sanitize(), strings.Join(tables, ", "))
	if _, err := s.db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}
