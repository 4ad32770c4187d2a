package store

import (
	"context"
	_ "embed" // the statements
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/queued_keys.sql
	queuedKeysSQL string
	//go:embed sql/queued_keys_continue.sql
	queuedKeysContinueSQL string
	//go:embed sql/key_queue.sql
	keyQueueSQL string
	//go:embed sql/held_keys_walk.sql
	heldKeysWalkSQL string
	//go:embed sql/held_keys_page.sql
	heldKeysPageSQL string
	//go:embed sql/held_keys_count.sql
	heldKeysCountSQL string
	//go:embed sql/skip.sql
	skipSQL string
)

// QueuedKey is a topic and key whose new events queue behind earlier ones.
type QueuedKey struct {
	Topic, Key string
	// Draining: the key's first unfinished event is queued and is delivered
	// next; otherwise it is FAILED or waiting for a retry.
	Draining bool
}

// QueuedKeys lists up to limit keys whose new events must queue: with hold,
// keys with any PENDING, PROCESSING or FAILED row; without, keys with a row
// queued and not yet attempted.
func (s *Store) QueuedKeys(ctx context.Context, hold bool, limit int) ([]QueuedKey, error) {
	sql, args := queuedKeys(hold, limit)
	return collect(ctx, s.db, "listing queued keys", rowToQueuedKey, sql, args...)
}

// queuedKeys is QueuedKeys' statement: under continue, one that walks only
// the keys with a row queued and not yet attempted.
func queuedKeys(hold bool, limit int) (string, []any) {
	if !hold {
		return queuedKeysContinueSQL, []any{limit}
	}
	return queuedKeysSQL, []any{limit}
}

// rowToQueuedKey reads a row of topic, key and draining.
func rowToQueuedKey(r pgx.CollectableRow) (QueuedKey, error) {
	var k QueuedKey
	err := r.Scan(&k.Topic, &k.Key, &k.Draining)
	return k, err
}

// HeldKey is a row of outbox.held_keys.
type HeldKey struct {
	Topic           string    `json:"topic"`
	Key             string    `json:"key"`
	BlockingEventID string    `json:"blocking_event_id"`
	Status          string    `json:"status"`
	Reason          string    `json:"failure_reason,omitempty"`
	LastError       string    `json:"last_error,omitempty"`
	Attempts        int       `json:"attempts"`
	Since           time.Time `json:"since"`
	Queued          int64     `json:"queued"`
}

// HeldCursor is a place in the order of held keys (topic, then key).
type HeldCursor struct{ Topic, Key string }

// HeldKeysPage lists up to limit held keys (of topic; "": all) after
// cursor (nil: from the first), in topic and key order, each with the
// events queued behind it counted up to queuedBound. It reads one index
// descent a key, not every unfinished row (as outbox.held_keys does): the
// console and `outbox-relay held` share it.
func (s *Store) HeldKeysPage(ctx context.Context, topic string, after *HeldCursor, limit, queuedBound int) ([]HeldKey, error) {
	var at, key *string
	if after != nil {
		at, key = &after.Topic, &after.Key
	}
	return collect(ctx, s.db, "reading the held keys", func(r pgx.CollectableRow) (HeldKey, error) {
		var h HeldKey
		err := r.Scan(&h.Topic, &h.Key, &h.BlockingEventID, &h.Status, &h.Reason, &h.LastError, &h.Attempts, &h.Since, &h.Queued)
		return h, err
	}, heldKeysWalkSQL+heldKeysPageSQL, pgx.QueryExecModeExec, nullable(topic), at, key, limit, queuedBound)
}

// KeyQueue lists up to limit unfinished events of topic's key in the
// order the relay delivers them: when the key is held, the first blocks
// the others.
func (s *Store) KeyQueue(ctx context.Context, topic, key string, limit int) ([]EventRow, error) {
	return collect(ctx, s.db, "reading a key's queue", func(r pgx.CollectableRow) (EventRow, error) {
		var x EventRow
		err := r.Scan(&x.EventID, &x.Status, &x.Topic, &x.Key, &x.Reason, &x.LastError, &x.Attempts, &x.UpdatedAt)
		return x, err
	}, keyQueueSQL, topic, key, limit)
}

// CountHeldKeys counts the held keys (of topic; "": all), up to bound.
func (s *Store) CountHeldKeys(ctx context.Context, topic string, bound int) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, heldKeysWalkSQL+heldKeysCountSQL, pgx.QueryExecModeExec, nullable(topic), nil, nil, bound).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting the held keys: %w", err)
	}
	return n, nil
}

// Skip runs outbox.skip: a FAILED event becomes SKIPPED and releases its
// key. When it was not FAILED, status says what it is ("" when the event
// has no status row or does not exist).
func (s *Store) Skip(ctx context.Context, id string) (skipped bool, status string, err error) {
	if err := s.db.QueryRow(ctx, skipSQL, id).Scan(&skipped, &status); err != nil {
		return false, "", fmt.Errorf("skipping event %s: %w", id, err)
	}
	return skipped, status, nil
}
