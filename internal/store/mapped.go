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
	//go:embed sql/insert_mapped_sent.sql
	insertMappedSentSQL string
	// insertMappedSentPlainSQL is insert_mapped_sent.sql without ON
	// CONFLICT, whose speculative insertion costs a quarter of the
	// statement (insert_sent.sql): a row that exists fails it, and the
	// batch is written again with the statement (sentConflicted).
	insertMappedSentPlainSQL = replaceAll(insertMappedSentSQL, "\nON CONFLICT (event_id) DO NOTHING", "")
	//go:embed sql/retention_mapped.sql
	retentionMappedSQL string

	// insert_outcomes.sql for batches with copies: their events are read
	// through outbox.relayed_events, which adds the copies to outbox.events,
	// and their rows take the copy's table. Batches of outbox.events alone
	// keep the plain statement.
	insertOutcomesMappedSQL = replaceAll(insertOutcomesSQL,
		"SELECT e.topic, e.key, e.seq FROM outbox.events e WHERE e.id = u.id",
		"SELECT e.topic, e.key, e.seq, NULLIF(e.source, 'outbox.events') AS source FROM outbox.relayed_events e WHERE e.id = u.id",
		"u.*, seen.topic, seen.key, seen.seq", "u.*, seen.topic, seen.key, seen.seq, seen.source",
		"tx_position, seq)", "tx_position, seq, source)",
		"coalesce(u.seq, 0)\n    FROM u", "coalesce(u.seq, 0), u.source\n    FROM u")
)

// replaceAll makes each replacement (old, new, ...) in sql; a replacement
// that no longer finds its text is a bug that must not pass silently.
func replaceAll(sql string, pairs ...string) string {
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(sql, pairs[i]) {
			panic("store: an outcome statement no longer contains " + pairs[i])
		}
		sql = strings.ReplaceAll(sql, pairs[i], pairs[i+1])
	}
	return sql
}

// Copy is the record a mapped table's row became, kept in
// outbox.mapped_events so that it can be retried and resent once the row
// is gone.
type Copy struct {
	EventID  [16]byte
	Source   string // schema.table
	SourceID string // the id column's text
	Topic    string // "": the row could not be mapped
	Key      []byte // the record's key, UTF-8 text (per-key order); nil: none
	Value    []byte // nil: a tombstone
	// Headers are the record's headers in order, as name and value.
	Headers   [][2]string
	EventType []byte
	CreatedAt time.Time
	Partition int32 // placed by a column; -1: by key
	// Seq is the row's outbox_seq (its key order), 0 without one.
	Seq int64
}

// copies is a batch of Copy in column form, as insert_copies.sql takes it.
type copies struct {
	ids                      [][16]byte
	sources, sourceIDs       []string
	topics, keys, eventTypes []*string
	values                   [][]byte
	headers                  []string // JSON arrays of [name, value]
	createdAt                []time.Time
	partitions               []int32
	seqs                     []*int64
}

// mappedSent is a batch of mapped events SENT on their first try, in
// column form, as insert_mapped_sent.sql takes it.
type mappedSent struct {
	ids              [][16]byte
	attempts, maxAtt []int32
	partitions       []int32
	offsets          []int64
	sources, topics  []string
}

func (m *mappedSent) reset() {
	*m = mappedSent{ids: m.ids[:0], attempts: m.attempts[:0], maxAtt: m.maxAtt[:0], partitions: m.partitions[:0],
		offsets: m.offsets[:0], sources: m.sources[:0], topics: m.topics[:0]}
}

// AddMapped adds the outcome of a mapped event, whose record is c: a plain
// SENT one carries its table and topic in its status row; any other keeps
// its record (AddCopy) for what comes after the first try.
func (o *Outcomes) AddMapped(r Outcome, c *Copy) {
	if !FirstTrySent(r) {
		o.Add(r)
		o.AddCopy(*c)
		return
	}
	m := &o.mapped
	m.ids = append(m.ids, r.EventID)
	m.attempts = append(m.attempts, r.Attempts)
	m.maxAtt = append(m.maxAtt, r.MaxAttempts)
	m.partitions = append(m.partitions, r.Partition)
	m.offsets = append(m.offsets, r.Offset)
	m.sources = append(m.sources, c.Source)
	m.topics = append(m.topics, c.Topic)
}

// FirstTrySent reports whether r is a plain SENT outcome: a mapped event
// with it keeps no copy.
func FirstTrySent(r Outcome) bool {
	return r.Status == StatusSent && r.LastError == "" && r.Reason == "" && r.Delay == 0
}

// AddCopy adds the record of a mapped event; InsertOutcomes keeps it with
// the status rows.
func (o *Outcomes) AddCopy(c Copy) {
	k := &o.copies
	k.ids = append(k.ids, c.EventID)
	k.sources = append(k.sources, c.Source)
	k.sourceIDs = append(k.sourceIDs, c.SourceID)
	var topic []byte // NULL: not mapped
	if c.Topic != "" {
		topic = []byte(c.Topic)
	}
	k.topics = append(k.topics, optional(topic))
	k.keys = append(k.keys, optional(c.Key))
	k.eventTypes = append(k.eventTypes, optional(c.EventType))
	k.values = append(k.values, c.Value)
	h := []byte{'['}
	for i, kv := range c.Headers {
		if i > 0 {
			h = append(h, ',')
		}
		h = append(mapping.AppendJSONString(append(mapping.AppendJSONString(append(h, '['), []byte(kv[0])), ','), []byte(kv[1])), ']')
	}
	k.headers = append(k.headers, string(append(h, ']')))
	k.createdAt = append(k.createdAt, c.CreatedAt)
	k.partitions = append(k.partitions, c.Partition)
	var seq *int64 // NULL: none
	if c.Seq != 0 {
		seq = &c.Seq
	}
	k.seqs = append(k.seqs, seq)
}

// optional is b as a text parameter: nil is NULL, empty is the empty string.
func optional(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func (k *copies) reset() {
	*k = copies{ids: k.ids[:0], sources: k.sources[:0], sourceIDs: k.sourceIDs[:0], topics: k.topics[:0],
		keys: k.keys[:0], eventTypes: k.eventTypes[:0], values: k.values[:0],
		headers: k.headers[:0], createdAt: k.createdAt[:0], partitions: k.partitions[:0], seqs: k.seqs[:0]}
}

// queueCopies adds the statement that keeps o's copies to batch.
func queueCopies(batch *pgx.Batch, o *Outcomes) {
	k := &o.copies
	batch.Queue(insertCopiesSQL, k.ids, k.sources, k.sourceIDs, k.topics, k.keys, k.values, k.headers,
		k.eventTypes, k.createdAt, k.partitions, k.seqs)
}

// insertMapped writes a batch with mapped events in one round trip and one
// transaction (a pgx batch ends with one Sync): the copies, the status rows
// of mapped events SENT on their first try, then the other rows with
// sql and args (none: no other rows). It returns how many events were
// visible: every mapped event, and those of outbox.events that sql saw.
func (s *Store) insertMapped(ctx context.Context, o *Outcomes, plain bool, policy []byte, sql string, args ...any) (visible int, err error) {
	batch := &pgx.Batch{}
	if len(o.copies.ids) > 0 {
		queueCopies(batch, o)
	}
	m := &o.mapped
	if len(m.ids) > 0 {
		sentSQL := insertMappedSentSQL
		if plain {
			sentSQL = insertMappedSentPlainSQL
		}
		batch.Queue(sentSQL, m.ids, m.attempts, m.partitions, m.offsets, m.maxAtt, m.sources, m.topics,
			policy, s.now())
	}
	if sql != "" {
		batch.Queue(sql, args...)
	}
	res := s.status.SendBatch(ctx, batch)
	defer res.Close()
	if len(o.copies.ids) > 0 {
		if _, err := res.Exec(); err != nil {
			return 0, fmt.Errorf("keeping %d records of mapped events: %w", len(o.copies.ids), err)
		}
	}
	if len(m.ids) > 0 {
		if _, err := res.Exec(); err != nil {
			return 0, err
		}
	}
	if sql != "" {
		if err := res.QueryRow().Scan(&visible); err != nil {
			return 0, err
		}
	}
	return visible + len(m.ids), res.Close()
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
		if err := rows.Scan(&c.EventID, &c.Source, &c.SourceID, &topic, &c.Key, &c.Value, &headers, &eventType,
			&c.CreatedAt, &c.Partition, &c.Seq); err != nil {
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
