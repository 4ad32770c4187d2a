// Package store runs every statement the relay and its CLI make on
// outbox.events and outbox.deliveries. The SQL lives in sql/*.sql; each
// state change is guarded by the state it expects.
package store

import (
	"context"
	_ "embed" // the statements
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
)

// Status is a delivery state in outbox.deliveries.status.
type Status string

// The delivery states.
const (
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusSent       Status = "SENT"
	StatusFailed     Status = "FAILED"
)

// Failure reasons the relay decides itself (Kafka's are in internal/kafka).
const (
	ReasonInvalidEvent     = "INVALID_EVENT"
	ReasonRetriesExhausted = "RETRIES_EXHAUSTED"
)

// DB is what the store needs of a connection or a pool.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs the outbox statements.
type Store struct {
	db DB
	// status writes stream outcomes (insert_outcomes.sql): synchronous_commit
	// off, sequential scans off. The stream waits for the WAL flush itself
	// (Barrier) before it confirms the slot.
	status DB
	close  func()
	clock  func() time.Time // nil: the database's now()
	// sentConflict: until when (unix ns) InsertOutcomes writes batches of
	// SENT outcomes with insert_outcomes.sql (see InsertOutcomes). Shared
	// by WithClock's copies.
	sentConflict *atomic.Int64
	// inTx: db and status are one transaction, which a failed statement
	// would abort: InsertOutcomes never tries insert_sent.sql there.
	inTx bool
}

// New returns a Store that runs every statement on db.
func New(db DB) *Store {
	return &Store{db: db, status: db, close: func() {}, sentConflict: new(atomic.Int64)}
}

// Open returns a Store with its own pools for databaseURL; it does not
// connect yet. Their connections fail once the server leaves what they
// sent unacknowledged for tcpTimeout (pgdial). Close releases them.
func Open(databaseURL string, tcpTimeout time.Duration) (*Store, error) {
	pc, err := pgdial.PoolConfig(databaseURL, tcpTimeout)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	// The outbox tables swing from empty to millions of rows and back faster
	// than autovacuum re-analyzes them. A generic plan made while
	// outbox.deliveries looked empty scans it whole for every batch (a
	// 200,000-event backlog took 54 s instead of 8), so the relay's own
	// queries are planned for the table as it is at each execution. Stream
	// outcomes (sc) have a plan whose shape cannot change (insert_outcomes.sql).
	sc := pc.Copy()
	if _, set := pc.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	sc.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	sc.ConnConfig.RuntimeParams["enable_seqscan"] = "off" // see insert_outcomes.sql
	sc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	status, err := pgxpool.NewWithConfig(context.Background(), sc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	return &Store{db: pool, status: status, close: func() { pool.Close(); status.Close() }, sentConflict: new(atomic.Int64)}, nil
}

// Close releases what Open opened.
func (s *Store) Close() { s.close() }

var (
	//go:embed sql/barrier.sql
	barrierSQL string
	//go:embed sql/existing.sql
	existingSQL string
	//go:embed sql/highest_status_id.sql
	highestStatusIDSQL string
)

// Barrier returns once every transaction committed before it is on disk.
func (s *Store) Barrier(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, barrierSQL); err != nil {
		return fmt.Errorf("waiting for status rows to reach disk: %w", err)
	}
	return nil
}

// HighestStatusID returns the greatest event id with a status row; ok is
// false when there is none.
func (s *Store) HighestStatusID(ctx context.Context) (id [16]byte, ok bool, err error) {
	switch err := s.db.QueryRow(ctx, highestStatusIDSQL).Scan(&id); {
	case errors.Is(err, pgx.ErrNoRows):
		return id, false, nil
	case err != nil:
		return id, false, fmt.Errorf("reading the highest event id with a status row: %w", err)
	}
	return id, true, nil
}

// collect runs a query and scans every row with scan; errors say what was
// being done.
func collect[T any](ctx context.Context, db DB, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Existing returns which of ids have a status row, with the row's source
// ("" for outbox.events, else the mapped table): an event of outbox.events
// may have a mapped event's id, and the row is only the one's of its source.
func (s *Store) Existing(ctx context.Context, ids [][16]byte) (map[[16]byte]string, error) {
	type row struct {
		ID     [16]byte
		Source string
	}
	found, err := collect(ctx, s.db, "looking up existing delivery rows", pgx.RowToStructByPos[row], existingSQL, ids)
	if err != nil {
		return nil, err
	}
	set := make(map[[16]byte]string, len(found))
	for _, r := range found {
		set[r.ID] = r.Source
	}
	return set, nil
}

// WithClock returns a Store whose statements take now() from clock instead
// of the database, so that tests of thresholds, backoff and grace periods
// need not wait.
func (s *Store) WithClock(clock func() time.Time) *Store {
	c := *s
	c.clock = clock
	return &c
}

// now is the time to pass to a statement: nil (the database's now())
// unless a clock is set.
func (s *Store) now() *time.Time {
	if s.clock == nil {
		return nil
	}
	t := s.clock()
	return &t
}

//go:embed sql/delivery_counts.sql
var deliveryCountsSQL string

// DeliveryCounts are the figures an operator watches.
type DeliveryCounts struct {
	Pending          int64
	OldestPendingAge time.Duration // how long the most overdue PENDING row has been due
	Failed           int64
}

// Counts reads the PENDING and FAILED counts from their indexes.
func (s *Store) Counts(ctx context.Context) (DeliveryCounts, error) {
	var c DeliveryCounts
	var age float64
	if err := s.db.QueryRow(ctx, deliveryCountsSQL).Scan(&c.Pending, &age, &c.Failed); err != nil {
		return c, fmt.Errorf("counting deliveries: %w", err)
	}
	c.OldestPendingAge = time.Duration(age * float64(time.Second))
	return c, nil
}

//go:embed sql/end_walsender.sql
var endWalsenderSQL string

// EndWalsender terminates the walsender with process id pid, if there is
// one, and reports whether it did.
func (s *Store) EndWalsender(ctx context.Context, pid uint32) (bool, error) {
	var ended bool
	if err := s.db.QueryRow(ctx, endWalsenderSQL, int32(pid)).Scan(&ended); err != nil {
		return false, fmt.Errorf("ending walsender %d: %w", pid, err)
	}
	return ended, nil
}

// readEvents runs a statement that returns events' rows in their own
// columns' types, which are the user's to change (payload altered to text
// or bytea). A prepared statement's cached plan would then be refused
// ("cached plan must not change result type"), once on each of the pool's
// connections, and read as PostgreSQL being unavailable. So these
// statements are parsed, bound, described and run unnamed in one round
// trip (QueryExecModeCacheDescribe: only the parameters' types are
// cached), planned anew each time, their result types read from the run
// itself. One round trip matters: the table lock taken at the parse is held
// until the run, so an ALTER cannot come between them, as it could between
// QueryExecModeDescribeExec's describe and run (3 times in 120 runs of
// TestRelay_APayloadColumnTypeChangeIsNoPostgresOutage). They run once a
// batch, not once an event.
func (s *Store) readEvents(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.db.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}
