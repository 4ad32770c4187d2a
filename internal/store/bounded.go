package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// bounded runs every statement of db with a deadline, so that a connection
// that stopped answering (a dead network path, a frozen server) fails the
// statement in bounded time. pgx closes a connection whose statement ran
// out of time; the pool then dials a fresh one for the retry.
type bounded struct {
	db    DB
	limit time.Duration
}

func (b bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := context.WithTimeout(ctx, b.limit)
	defer cancel()
	return b.db.Exec(ctx, sql, args...)
}

func (b bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := context.WithTimeout(ctx, b.limit)
	rows, err := b.db.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, err
	}
	return &boundedRows{Rows: rows, cancel: cancel}, nil
}

func (b bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, cancel := context.WithTimeout(ctx, b.limit)
	return &boundedRow{row: b.db.QueryRow(ctx, sql, args...), cancel: cancel}
}

func (b bounded) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	ctx, cancel := context.WithTimeout(ctx, b.limit)
	return &boundedBatch{BatchResults: b.db.SendBatch(ctx, batch), cancel: cancel}
}

// boundedBatch ends the batch's deadline when its results are closed.
type boundedBatch struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (r *boundedBatch) Close() error {
	defer r.cancel()
	return r.BatchResults.Close()
}

// boundedRows ends the statement's deadline when the rows are closed.
type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

type boundedRow struct {
	row    pgx.Row
	cancel context.CancelFunc
}

func (r *boundedRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.row.Scan(dest...)
}

// WithStatementTimeout returns a Store whose statements each fail after
// limit (0 or less: no limit).
func (s *Store) WithStatementTimeout(limit time.Duration) *Store {
	if limit <= 0 {
		return s
	}
	c := *s
	c.db = bounded{db: s.db, limit: limit}
	c.status = bounded{db: s.status, limit: limit}
	return &c
}

// beginner is a DB that can begin a transaction (a pool, a connection).
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// begin begins a transaction on db and returns it with a DB that runs
// statements in it, bounded as db's are, and that bound (0: none), for the
// commit.
func begin(ctx context.Context, db DB) (pgx.Tx, DB, time.Duration, error) {
	if b, ok := db.(bounded); ok {
		tx, _, _, err := begin(ctx, b.db)
		if err != nil {
			return nil, nil, 0, err
		}
		return tx, bounded{db: tx, limit: b.limit}, b.limit, nil
	}
	bg, ok := db.(beginner)
	if !ok {
		return nil, nil, 0, errors.New("the store cannot begin a transaction")
	}
	tx, err := bg.Begin(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	return tx, tx, 0, nil
}
