package store

import (
	"context"
	_ "embed" // the statements
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/outbox-relay/outbox-relay/cdc"
)

var (
	//go:embed sql/backfill_start.sql
	backfillStartSQL string
	//go:embed sql/backfill_finish.sql
	backfillFinishSQL string
	//go:embed sql/backfill_unfinished.sql
	backfillUnfinishedSQL string
	//go:embed sql/backfill_page.sql
	backfillPageSQL string
	//go:embed sql/backfill_keys.sql
	backfillKeysSQL string
	//go:embed sql/backfill_events.sql
	backfillEventsSQL string
	//go:embed sql/backfill_running.sql
	backfillRunningSQL string
	//go:embed sql/insert_pending.sql
	insertPendingSQL string
	//go:embed sql/schema_check.sql
	schemaCheckSQL string
	//go:embed sql/missing_rights.sql
	missingRightsSQL string
)

// ErrNoSchema says the outbox tables are missing.
var ErrNoSchema = errors.New("the outbox schema does not exist")

// SchemaVersion returns the outbox schema's migration version, or
// ErrNoSchema.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var exists bool
	if err := s.db.QueryRow(ctx, schemaCheckSQL).Scan(&exists); err != nil {
		return 0, fmt.Errorf("looking for the outbox schema: %w", err)
	}
	if !exists {
		return 0, ErrNoSchema
	}
	var v int
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM outbox.schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the outbox schema version: %w", err)
	}
	return v, nil
}

// Rights is what the connection's role lacks of a group role's rights on
// the outbox schema.
type Rights struct {
	// User is the connection's role (current_user).
	User string
	// GroupExists is false when the group role does not exist (roles
	// managed by hand): Missing is then empty.
	GroupExists bool
	// Missing are the grants the group has and User has not, such as
	// "SELECT ON outbox.deliveries" or "EXECUTE ON FUNCTION outbox.skip(uuid)".
	Missing []string
}

// MissingRights compares the connection's role with group (outbox_relay,
// outbox_operator) on the outbox schema's objects. It reads the catalog
// only, so it answers for a role that may read nothing of the outbox.
func (s *Store) MissingRights(ctx context.Context, group string) (Rights, error) {
	var r Rights
	if err := s.db.QueryRow(ctx, missingRightsSQL, group).Scan(&r.User, &r.GroupExists, &r.Missing); err != nil {
		return Rights{}, fmt.Errorf("comparing the rights of the current role with %s: %w", group, err)
	}
	return r, nil
}

// BackfillStarted records that slot is about to be created and backfilled.
func (s *Store) BackfillStarted(ctx context.Context, slot string) error {
	if _, err := s.db.Exec(ctx, backfillStartSQL, slot); err != nil {
		return fmt.Errorf("recording the backfill of slot %q: %w", slot, err)
	}
	return nil
}

// BackfillFinished records that the backfill of slot gave events a row.
func (s *Store) BackfillFinished(ctx context.Context, slot string, events int64) error {
	if _, err := s.db.Exec(ctx, backfillFinishSQL, slot, events); err != nil {
		return fmt.Errorf("recording the end of the backfill of slot %q: %w", slot, err)
	}
	return nil
}

// BackfillUnfinished reports whether a backfill of slot started and never
// finished.
func (s *Store) BackfillUnfinished(ctx context.Context, slot string) (bool, error) {
	var unfinished bool
	if err := s.db.QueryRow(ctx, backfillUnfinishedSQL, slot).Scan(&unfinished); err != nil {
		return false, fmt.Errorf("reading the backfill of slot %q: %w", slot, err)
	}
	return unfinished, nil
}

// UnrelayedKeys returns up to limit keys (topic and key) of events without a
// status row, as the snapshot of the transaction the store runs in sees
// them.
func (s *Store) UnrelayedKeys(ctx context.Context, limit int) ([]QueuedKey, error) {
	return collect(ctx, s.db, "listing the keys of events without a status row", rowToQueuedKey, backfillKeysSQL, limit)
}

// BackfillCursor is where a backfill has got to, in the order it walks
// events: created_at, then insertion order (seq), then id. The zero value is
// the start.
type BackfillCursor struct {
	CreatedAt time.Time
	Seq       int64
	ID        [16]byte
}

// UnrelayedPage returns up to limit ids, after cursor, of events without a
// status row, as the snapshot of the transaction the store runs in sees
// them, and the cursor after them.
func (s *Store) UnrelayedPage(ctx context.Context, after BackfillCursor, limit int) ([][16]byte, BackfillCursor, error) {
	from := pgtype.Timestamptz{Time: after.CreatedAt, Valid: true}
	if after.CreatedAt.IsZero() {
		from.Time, from.InfinityModifier = time.Time{}, pgtype.NegativeInfinity
		after.Seq = -1
	}
	rows, err := s.db.Query(ctx, backfillPageSQL, from, after.Seq, after.ID, limit)
	if err != nil {
		return nil, after, fmt.Errorf("reading events without a status row: %w", err)
	}
	var ids [][16]byte
	next := after
	_, err = pgx.ForEachRow(rows, []any{&next.ID, &next.CreatedAt, &next.Seq}, func() error {
		ids = append(ids, next.ID)
		return nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("reading events without a status row: %w", err)
	}
	return ids, next, nil
}

// EventPage is a page of events read from the table for delivery.
type EventPage struct {
	// Events describes the columns of every row's Values.
	Events *cdc.Relation
	// Values are each event's columns in binary format, in the page's order.
	Values [][][]byte
	// Bytes is the size of Values' columns.
	Bytes int
	// HasRow says which of them have a status row by now: someone else
	// owns them (nil: none has).
	HasRow []bool
	// Waits says which of them must wait behind rows of their key (nil:
	// none, as far as the page knows).
	Waits []bool
	// Read is how many of the ids asked for the page covers (backfill).
	Read int
	// Last is the created_at of the page's last event, and Full says the
	// sweep found more than the page holds (gap sweep).
	Last *time.Time
	Full bool
}

// ReadBackfillEvents reads the events ids, in that order, with whether each
// has a status row; events deleted meanwhile are left out. It stops after
// the event that takes the values read to maxBytes: Read says how many ids
// the page covers.
func (s *Store) ReadBackfillEvents(ctx context.Context, ids [][16]byte, maxBytes int) (*EventPage, error) {
	rows, err := s.readEvents(ctx, backfillEventsSQL, pgx.QueryResultFormats{pgx.BinaryFormatCode}, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d events to backfill: %w", len(ids), err)
	}
	page, hasRow, at, full, err := readPage(rows, maxBytes) // at: the last event's place in ids
	if err != nil {
		return nil, fmt.Errorf("reading %d events to backfill: %w", len(ids), err)
	}
	page.HasRow, page.Read = hasRow, len(ids)
	if full {
		page.Read = int(at)
	}
	return page, nil
}

// readPage reads the rows of a page statement (backfill_events.sql,
// sweep_events.sql): a bigint mark, a flag, then the event's columns. It
// returns the page of events, their flags, the last row's mark and whether
// it stopped at maxBytes (eachEventRow).
func readPage(rows pgx.Rows, maxBytes int) (page *EventPage, flags []bool, mark int64, full bool, err error) {
	page = &EventPage{}
	page.Events, page.Bytes, err = eachEventRow(rows, 2, maxBytes, func(raw, values [][]byte) error {
		if len(raw[0]) != 8 || len(raw[1]) != 1 {
			return errors.New("unexpected relay columns")
		}
		mark = int64(binary.BigEndian.Uint64(raw[0]))
		page.Values = append(page.Values, values)
		flags = append(flags, raw[1][0] == 1)
		return nil
	})
	return page, flags, mark, maxBytes > 0 && page.Bytes >= maxBytes, err
}

// BackfillRunning reports whether the backfill of some slot has started, not
// finished, and is still going (its slot is in use).
func (s *Store) BackfillRunning(ctx context.Context) (bool, error) {
	var running bool
	if err := s.db.QueryRow(ctx, backfillRunningSQL).Scan(&running); err != nil {
		return false, fmt.Errorf("looking for a running backfill: %w", err)
	}
	return running, nil
}

// InsertPending gives events a PENDING row, due now, with maxAttempts
// (unless an event has its own) and policy; it returns how many rows it
// inserted (rows that exist are left alone).
func (s *Store) InsertPending(ctx context.Context, ids [][16]byte, maxAttempts int, policy []byte) (int64, error) {
	tag, err := s.db.Exec(ctx, insertPendingSQL, ids, maxAttempts, policy)
	if err != nil {
		return 0, fmt.Errorf("giving %d events a PENDING row: %w", len(ids), err)
	}
	return tag.RowsAffected(), nil
}

// ImportSnapshot opens a read-only repeatable-read transaction on conn that
// sees the exported snapshot, and returns a Store whose statements run in
// it; release ends the transaction.
func ImportSnapshot(ctx context.Context, conn *pgx.Conn, snapshot string) (snap *Store, release func(), err error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the snapshot transaction: %w", err)
	}
	release = func() { _ = tx.Rollback(context.WithoutCancel(ctx)) } //nolint:errcheck // read-only: nothing to keep
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+cdc.QuoteLiteral(snapshot)); err != nil {
		release()
		return nil, nil, fmt.Errorf("importing snapshot %q: %w", snapshot, err)
	}
	return New(tx), release, nil
}
