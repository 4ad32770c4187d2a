package store

import (
	"context"
	_ "embed" // the statements
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
)

var (
	//go:embed sql/mapped_unrelayed.sql
	mappedUnrelayedSQL string
	//go:embed sql/mapped_unrelayed_exists.sql
	mappedUnrelayedExistsSQL string
)

// forTable puts t's quoted table and id column names into a statement
// written over TABLE and ID (its only words in capitals with those names).
func forTable(sql string, t *mapping.Table) string {
	return strings.NewReplacer("FROM TABLE e", "FROM "+t.Ident()+" e",
		"e.ID::text", "e."+pgx.Identifier{t.ID}.Sanitize()+"::text").Replace(sql)
}

// MappedPage is a page of a mapped table's rows without a status row.
type MappedPage struct {
	*EventPage // Events is the table's relation as the statement returned it
	// Times are the rows' outbox_created_at.
	Times []time.Time
	// Next is the cursor after the page's last row.
	Next BackfillCursor
}

// MappedUnrelayed reads up to limit rows of t without a status row, whose
// outbox_created_at lies in [after.CreatedAt, upper) and which come after
// the cursor (a Seq of -1 takes every row at after.CreatedAt), in their
// order (mapped_unrelayed.sql). It stops after the row that takes the
// values read to maxBytes (0: no limit). The zero cursor is the start.
func (s *Store) MappedUnrelayed(ctx context.Context, t *mapping.Table, after BackfillCursor, upper time.Time, limit, maxBytes int) (*MappedPage, error) {
	from := pgtype.Timestamptz{Time: after.CreatedAt, Valid: true}
	if after.CreatedAt.IsZero() {
		from.Time, from.InfinityModifier = time.Time{}, pgtype.NegativeInfinity
		after.Seq = -1
	}
	to := pgtype.Timestamptz{Time: upper, Valid: true}
	if upper.IsZero() {
		to.InfinityModifier = pgtype.Infinity
	}
	what := fmt.Sprintf("reading the rows of %s without a status row", t.QualifiedName())
	rows, err := s.readEvents(ctx, forTable(mappedUnrelayedSQL, t), pgx.QueryResultFormats{pgx.BinaryFormatCode},
		from, to, after.Seq, t.QualifiedName(), limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	page := &MappedPage{EventPage: &EventPage{}, Next: after}
	page.Events, page.Bytes, err = eachEventRow(rows, 2, maxBytes, func(raw, values [][]byte) error {
		if len(raw[0]) != 8 || len(raw[1]) != 8 {
			return errors.New("unexpected relay columns")
		}
		at := cdc.PgTime(int64(binary.BigEndian.Uint64(raw[0]))) //nolint:gosec // a timestamp
		page.Times = append(page.Times, at)
		page.Values = append(page.Values, values)
		page.Next = BackfillCursor{CreatedAt: at, Seq: int64(binary.BigEndian.Uint64(raw[1]))} //nolint:gosec // a bigint
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if page.Events != nil {
		page.Events.Namespace, page.Events.Name = t.Schema, t.Name
	}
	page.Full = len(page.Values) == limit || maxBytes > 0 && page.Bytes >= maxBytes
	return page, nil
}

// MappedUnrelayedExists reports whether t has a row that MappedUnrelayed
// would return from the cursor at from (zero: the start), as the snapshot
// of the transaction the store runs in sees it.
func (s *Store) MappedUnrelayedExists(ctx context.Context, t *mapping.Table, from time.Time) (bool, error) {
	since := pgtype.Timestamptz{Time: from, Valid: true}
	if from.IsZero() {
		since.InfinityModifier = pgtype.NegativeInfinity
	}
	var exists bool
	if err := s.db.QueryRow(ctx, forTable(mappedUnrelayedExistsSQL, t), t.QualifiedName(), since).Scan(&exists); err != nil {
		return false, fmt.Errorf("looking for rows of %s without a status row: %w", t.QualifiedName(), err)
	}
	return exists, nil
}
