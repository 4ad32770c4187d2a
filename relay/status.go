package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// Failure reasons in outbox.deliveries.failure_reason.
const (
	ReasonInvalidEvent        = "INVALID_EVENT"
	ReasonInvalidTopic        = "INVALID_TOPIC"
	ReasonUnauthorizedOnTopic = "UNAUTHORIZED_ON_TOPIC"
	ReasonMessageTooLarge     = "MESSAGE_TOO_LARGE"
	ReasonRetriesExhausted    = "RETRIES_EXHAUSTED"
)

// existingSQL finds events that already have a status row: replayed after a
// restart, or owned by the poller. The stream publishes none of them.
const existingSQL = `SELECT event_id FROM outbox.deliveries WHERE event_id = ANY($1::uuid[])`

// highestStatusIDSQL reads the greatest event id with a status row (uuids
// compare as their 16 bytes; PostgreSQL 15 has no max(uuid), the primary key
// answers this). An event with a greater id had no row then.
const highestStatusIDSQL = `SELECT event_id FROM outbox.deliveries ORDER BY event_id DESC LIMIT 1`

// statusCeiling tells which replayed events may have a status row: those
// with an id at or below the greatest id that had one when the session
// started (see highestStatusIDSQL), and those old enough for the poller's
// gap sweep to give them one at any time. Any id scheme is sound; with the
// default time-ordered ids, recent events newer than the last status row
// skip the look-up.
type statusCeiling struct {
	id    [16]byte
	valid bool // false: no status row at all
	// sweepAge: the gap sweep takes events older than --gap-grace by the
	// database's clock; half of it leaves room for the clocks' difference.
	sweepAge time.Duration
}

// mayHaveRow reads e's age from its message timestamp: created_at, or the
// commit time where the table has no created_at.
func (c statusCeiling) mayHaveRow(e *event, now time.Time) bool {
	return (c.valid && bytes.Compare(e.id[:], c.id[:]) <= 0) || now.Sub(e.msg.Timestamp) >= c.sweepAge
}

func readStatusCeiling(ctx context.Context, pool *pgxpool.Pool, gapGrace time.Duration) (statusCeiling, error) {
	c := statusCeiling{sweepAge: gapGrace / 2}
	switch err := pool.QueryRow(ctx, highestStatusIDSQL).Scan(&c.id); {
	case errors.Is(err, pgx.ErrNoRows):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("reading the highest event id with a status row: %w", err)
	}
	c.valid = true
	return c, nil
}

// insertStatusSQL records a batch of stream outcomes in one statement and
// returns how many of their events it could see. A row that appeared
// meanwhile belongs to whoever wrote it and is left alone. A row whose event
// is not visible is left out: the event was deleted, or (for a moment after
// a walsender sends a commit) it is not visible to other sessions yet.
//
// The existence check is a LATERAL probe per row so that the plan cannot turn
// around: a semi-join planned while outbox.events looked small walked the
// whole table once per status row (minutes per statement after a
// 1,000,000-row transaction). The status pool also disables sequential
// scans, so the probe is always the primary key.
const insertStatusSQL = `
WITH u AS (
    SELECT u.* FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::int[], $7::bigint[],
                           $8::bigint[], $9::int[])
           AS u(id, status, attempts, last_error, reason, part, off, delay_ms, max_attempts)
    CROSS JOIN LATERAL (SELECT 1 FROM outbox.events e WHERE e.id = u.id LIMIT 1) AS seen
), ins AS (
    INSERT INTO outbox.deliveries
        (event_id, status, attempts, last_error, failure_reason, next_attempt_at, kafka_partition, kafka_offset,
         sent_at, max_attempts, retry_policy)
    SELECT u.id, u.status, u.attempts, NULLIF(u.last_error, ''), NULLIF(u.reason, ''),
           now() + u.delay_ms * interval '1 millisecond',
           NULLIF(u.part, -1), NULLIF(u.off, -1),
           CASE WHEN u.status = 'SENT' THEN now() END,
           u.max_attempts, $10::jsonb
    FROM u
    ON CONFLICT (event_id) DO NOTHING
)
SELECT count(*) FROM u`

// statusRows is a batch of outcomes in column form, ready for unnest.
type statusRows struct {
	ids        [][16]byte
	statuses   []string
	attempts   []int32
	lastErrors []string
	reasons    []string
	partitions []int32
	offsets    []int64
	delaysMS   []int64
	maxAttempt []int32
	policy     []byte // retry.Policy JSON, the same for every row
}

func (s *statusRows) reset() {
	s.ids, s.statuses, s.attempts = s.ids[:0], s.statuses[:0], s.attempts[:0]
	s.lastErrors, s.reasons = s.lastErrors[:0], s.reasons[:0]
	s.partitions, s.offsets = s.partitions[:0], s.offsets[:0]
	s.delaysMS, s.maxAttempt = s.delaysMS[:0], s.maxAttempt[:0]
}

// add appends e's outcome; maxAttempts is the event's effective limit.
func (s *statusRows) add(e *event, maxAttempts int32) {
	r := &e.res
	s.ids = append(s.ids, e.id)
	s.statuses = append(s.statuses, string(r.status))
	s.attempts = append(s.attempts, r.attempts)
	s.lastErrors = append(s.lastErrors, r.lastError)
	s.reasons = append(s.reasons, r.reason)
	part, off := int32(-1), int64(-1)
	if r.status == StatusSent {
		part, off = r.partition, r.offset
	}
	s.partitions = append(s.partitions, part)
	s.offsets = append(s.offsets, off)
	s.delaysMS = append(s.delaysMS, r.delay.Milliseconds())
	s.maxAttempt = append(s.maxAttempt, maxAttempts)
}

// write inserts the rows and returns how many of their events were visible
// (the others got no row).
func (s *statusRows) write(ctx context.Context, pool *pgxpool.Pool) (visible int, err error) {
	if len(s.ids) == 0 {
		return 0, nil
	}
	err = pool.QueryRow(ctx, insertStatusSQL, s.ids, s.statuses, s.attempts, s.lastErrors, s.reasons, s.partitions,
		s.offsets, s.delaysMS, s.maxAttempt, s.policy).Scan(&visible)
	if err != nil {
		return 0, fmt.Errorf("writing %d delivery statuses: %w", len(s.ids), err)
	}
	return visible, nil
}

// markExisting sets skip on events of b that already have a status row,
// looking up only those the ceiling allows.
func markExisting(ctx context.Context, pool *pgxpool.Pool, ceiling statusCeiling, b *batch, ids [][16]byte) error {
	ids = ids[:0]
	now := time.Now()
	for i := range b.events {
		if ceiling.mayHaveRow(&b.events[i], now) {
			ids = append(ids, b.events[i].id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := pool.Query(ctx, existingSQL, ids)
	if err != nil {
		return fmt.Errorf("looking up existing delivery rows: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	if err != nil {
		return fmt.Errorf("looking up existing delivery rows: %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	set := make(map[[16]byte]struct{}, len(found))
	for _, id := range found {
		set[id] = struct{}{}
	}
	for i := range b.events {
		if _, ok := set[b.events[i].id]; ok {
			b.events[i].skip = true
		}
	}
	return nil
}

// barrierSQL is a synchronous commit (txid_current() makes the transaction
// write a commit record): when it returns, every transaction committed
// before it is on disk, whatever its synchronous_commit.
const barrierSQL = `SELECT txid_current()`
