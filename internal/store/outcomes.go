package store

import (
	"context"
	_ "embed" // the statements
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Outcome is the status row one delivery attempt leaves for an event.
type Outcome struct {
	EventID   [16]byte
	Status    Status
	Attempts  int32
	LastError string
	Reason    string
	// Partition and Offset say where a SENT event is on Kafka.
	Partition int32
	Offset    int64
	// Delay is how long a PENDING event waits before its next attempt, or
	// UntilBackfilled.
	Delay time.Duration
	// MaxAttempts is the event's effective limit.
	MaxAttempts int32
	// CommitLSN and TxPosition place a streamed event in the commit order:
	// its transaction's commit LSN and its position in the transaction.
	// Rows that are not SENT keep them (and their topic and key).
	CommitLSN  uint64
	TxPosition int32
}

// UntilBackfilled, as an Outcome's Delay, has the PENDING row wait until no
// backfill is running (next_attempt_at 'infinity' until ReleaseBackfilled):
// the stream queued its event behind events of its key that the backfill of
// a new slot has not given a row yet, and the poller must not take it first.
// It is the statements' mark, a delay of -1 ms.
const UntilBackfilled = -time.Millisecond

// Outcomes is a batch of outcomes in column form, as both outcome
// statements take it ($1..$9, and for the stream's rows the commit order in
// $10, $11). "No partition" is -1.
type Outcomes struct {
	ids        [][16]byte
	statuses   []string
	attempts   []int32
	lastErrors []string
	reasons    []string
	partitions []int32
	offsets    []int64
	delaysMS   []int64
	maxAttempt []int32
	lsns       []int64
	positions  []int32
	// unsent counts the outcomes that are not a plain SENT: with none,
	// InsertOutcomes writes the batch with insert_sent.sql.
	unsent int
	// written: InsertOutcomes has written o before, so its visible rows
	// exist (a retry for events that were not visible yet).
	written bool
	// copies are the records of o's mapped events (AddCopy); mapped, the
	// mapped events SENT on their first try (AddMapped).
	copies copies
	mapped mappedSent
}

// Reset empties o, keeping its memory.
func (o *Outcomes) Reset() {
	o.ids, o.statuses, o.attempts = o.ids[:0], o.statuses[:0], o.attempts[:0]
	o.lastErrors, o.reasons = o.lastErrors[:0], o.reasons[:0]
	o.partitions, o.offsets = o.partitions[:0], o.offsets[:0]
	o.delaysMS, o.maxAttempt = o.delaysMS[:0], o.maxAttempt[:0]
	o.lsns, o.positions = o.lsns[:0], o.positions[:0]
	o.unsent, o.written = 0, false
	o.copies.reset()
	o.mapped.reset()
}

// Len is the number of outcomes in o.
func (o *Outcomes) Len() int { return len(o.ids) + len(o.mapped.ids) }

// Add appends one outcome.
func (o *Outcomes) Add(r Outcome) {
	o.ids = append(o.ids, r.EventID)
	o.statuses = append(o.statuses, string(r.Status))
	o.attempts = append(o.attempts, r.Attempts)
	o.lastErrors = append(o.lastErrors, r.LastError)
	o.reasons = append(o.reasons, r.Reason)
	part, off := int32(-1), int64(-1)
	if r.Status == StatusSent {
		part, off = r.Partition, r.Offset
	}
	o.partitions = append(o.partitions, part)
	o.offsets = append(o.offsets, off)
	o.delaysMS = append(o.delaysMS, r.Delay.Milliseconds())
	o.maxAttempt = append(o.maxAttempt, r.MaxAttempts)
	o.lsns = append(o.lsns, int64(r.CommitLSN)) //nolint:gosec // an LSN fits: PostgreSQL's WAL is far from 2^63 bytes
	o.positions = append(o.positions, r.TxPosition)
	if r.Status != StatusSent || r.LastError != "" || r.Reason != "" || r.Delay != 0 {
		o.unsent++
	}
}

// args returns o as the statements' $1..$9, then, with order, the commit
// order ($10, $11), then more.
func (o *Outcomes) args(order bool, more ...any) []any {
	args := []any{o.ids, o.statuses, o.attempts, o.lastErrors, o.reasons, o.partitions, o.offsets,
		o.delaysMS, o.maxAttempt}
	if order {
		args = append(args, o.lsns, o.positions)
	}
	return append(args, more...)
}

var (
	//go:embed sql/insert_outcomes.sql
	insertOutcomesSQL string
	//go:embed sql/insert_sent.sql
	insertSentSQL string
	//go:embed sql/record_outcomes.sql
	recordOutcomesSQL string
)

// InsertOutcomes gives the stream's events their status rows, with policy
// (a retry.Policy's JSON) as their retry_policy, and returns how many of the
// events were visible: the others got no row. It commits without waiting for
// the WAL flush; see Barrier.
//
// A batch of SENT outcomes only is written with insert_sent.sql, which
// fails when one of its rows exists already (the gap sweep or a resend wrote
// it meanwhile). The batch is then written with insert_outcomes.sql, which
// leaves such rows alone, and so are, for sentConflictPause, the batches
// after it: PostgreSQL logs each failure as an error, and while the stream
// lags behind the gap sweep most batches would fail. insert_outcomes.sql
// also writes a batch written before (its visible rows exist now) and every
// batch inside a transaction (the failure would abort it).
func (s *Store) InsertOutcomes(ctx context.Context, o *Outcomes, policy []byte) (visible int, err error) {
	if o.Len() == 0 {
		return 0, nil
	}
	sentOnly := o.unsent == 0 && !o.written && !s.inTx && time.Now().UnixNano() >= s.sentConflict.Load()
	mapped := len(o.copies.ids) > 0 || len(o.mapped.ids) > 0
	o.written = true
	switch {
	case mapped && sentOnly && len(o.copies.ids) == 0:
		// Plain inserts: a row that exists fails the batch, which is then
		// written again with the statements that leave such rows alone.
		var sql string
		var args []any
		if len(o.ids) > 0 {
			sql, args = insertSentSQL, []any{o.ids, o.attempts, o.partitions, o.offsets, o.maxAttempt, policy, s.now()}
		}
		visible, err = s.insertMapped(ctx, o, true, policy, sql, args...)
		if !s.sentConflicted(err) {
			return visible, statusesErr(o, err)
		}
	case sentOnly && !mapped:
		err = s.status.QueryRow(ctx, insertSentSQL, o.ids, o.attempts, o.partitions, o.offsets, o.maxAttempt,
			policy, s.now()).Scan(&visible)
		if !s.sentConflicted(err) {
			return visible, statusesErr(o, err)
		}
	}
	if mapped {
		var sql string
		var args []any
		if len(o.ids) > 0 {
			sql, args = insertOutcomesMappedSQL, o.args(true, policy, s.now())
		}
		visible, err = s.insertMapped(ctx, o, false, policy, sql, args...)
		return visible, statusesErr(o, err)
	}
	err = s.status.QueryRow(ctx, insertOutcomesSQL, o.args(true, policy, s.now())...).Scan(&visible)
	return visible, statusesErr(o, err)
}

// sentConflicted reports whether err is insert_sent.sql's unique violation
// (a row exists already): the batch is then written with
// insert_outcomes.sql, and so are the batches of the next sentConflictPause.
func (s *Store) sentConflicted(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != uniqueViolation {
		return false
	}
	s.sentConflict.Store(time.Now().Add(sentConflictPause).UnixNano())
	return true
}

// statusesErr is err, if any, from writing o's status rows.
func statusesErr(o *Outcomes, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("writing %d delivery statuses: %w", o.Len(), err)
}

// sentConflictPause is how long InsertOutcomes writes every batch with
// insert_outcomes.sql after a batch of SENT outcomes found a row.
const sentConflictPause = time.Minute

// uniqueViolation is PostgreSQL's SQLSTATE unique_violation.
const uniqueViolation = "23505"

// RecordOutcomes updates the rows instance claimed with their outcomes;
// rows it no longer holds are left alone.
func (s *Store) RecordOutcomes(ctx context.Context, instance string, o *Outcomes) error {
	if o.Len() == 0 {
		return nil
	}
	if _, err := s.db.Exec(ctx, recordOutcomesSQL, o.args(false, instance, s.now())...); err != nil {
		return fmt.Errorf("recording %d outcomes: %w", o.Len(), err)
	}
	return nil
}
