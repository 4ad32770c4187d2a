package store

import (
	"context"
	_ "embed" // the statements
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outbox-relay/outbox-relay/cdc"
)

var (
	//go:embed sql/dead_letter_since.sql
	deadLetterSinceSQL string
	//go:embed sql/dead_letter_claim.sql
	deadLetterClaimSQL string
	//go:embed sql/dead_letter_done.sql
	deadLetterDoneSQL string
)

// DeadLetterSince is when failures started going to the dead-letter topic
// topic: the first time a relay ran with it, recorded now if this is it.
func (s *Store) DeadLetterSince(ctx context.Context, topic string) (time.Time, error) {
	var since time.Time
	if err := s.db.QueryRow(ctx, deadLetterSinceSQL, topic).Scan(&since); err != nil {
		return since, fmt.Errorf("reading when dead-letter topic %s was first used (outbox.dead_letter_topics): %w", topic, err)
	}
	return since, nil
}

// DeadLetter is a FAILED row whose failure is to be published on the
// dead-letter topic, with its event.
type DeadLetter struct {
	EventID   [16]byte
	Reason    string
	LastError string
	Attempts  int32
	FailedAt  time.Time // the row's updated_at: which failure this is
	Topic     string    // the row's topic, if it has one
	// Values are the event's columns in binary format (Events), all nil
	// for a mapped event, whose record is Copy.
	Values [][]byte
	Copy   *Copy
	Mapped bool
}

// DeadLetters are rows ClaimDeadLetters took.
type DeadLetters struct {
	Events *cdc.Relation
	Rows   []DeadLetter
}

// deadLetterColumns is how many relay_* columns precede the event's in
// dead_letter_claim.sql.
const deadLetterColumns = 6

// ClaimDeadLetters takes up to limit failures since since that are not on
// the dead-letter topic yet, each held for lease.
func (s *Store) ClaimDeadLetters(ctx context.Context, since time.Time, limit int, lease time.Duration) (*DeadLetters, error) {
	rows, err := s.readEvents(ctx, deadLetterClaimSQL, pgx.QueryResultFormats{pgx.BinaryFormatCode}, since, limit,
		lease.Milliseconds(), s.now())
	if err != nil {
		return nil, fmt.Errorf("claiming failures for the dead-letter topic: %w", err)
	}
	m := pgtype.NewMap()
	d := &DeadLetters{}
	d.Events, _, err = eachEventRow(rows, deadLetterColumns, 0, func(raw, values [][]byte) error {
		var r DeadLetter
		var attempts int32
		for i, dst := range []any{&r.EventID, &r.Reason, &r.LastError, &attempts, &r.FailedAt, &r.Topic} {
			if err := m.Scan(rows.FieldDescriptions()[i].DataTypeOID, pgx.BinaryFormatCode, raw[i], dst); err != nil {
				return fmt.Errorf("column %s: %w", rows.FieldDescriptions()[i].Name, err)
			}
		}
		r.Attempts, r.Values = attempts, values
		d.Rows = append(d.Rows, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming failures for the dead-letter topic: %w", err)
	}
	err = s.keptRecords(ctx, d.Events, len(d.Rows), func(i int) ([][]byte, [16]byte) { return d.Rows[i].Values, d.Rows[i].EventID },
		func(i int, cp *Copy) { d.Rows[i].Mapped, d.Rows[i].Copy = true, cp })
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Dead-letter statuses: the failure is on the dead-letter topic, or the
// topic refused it. DeadLetterRetry: Kafka was not available; try again.
const (
	DeadLetterSent   = "SENT"
	DeadLetterFailed = "FAILED"
	DeadLetterRetry  = ""
)

// DeadLetterOutcome is what became of one dead letter.
type DeadLetterOutcome struct {
	EventID  [16]byte
	Status   string // DeadLetterSent, DeadLetterFailed or DeadLetterRetry
	Error    string // DeadLetterFailed: why the topic refused it
	FailedAt time.Time
}

// DeadLettered records outcomes on the rows still FAILED with the same
// failure; a retry waits retryAfter.
func (s *Store) DeadLettered(ctx context.Context, outcomes []DeadLetterOutcome, retryAfter time.Duration) error {
	if len(outcomes) == 0 {
		return nil
	}
	ids := make([][16]byte, len(outcomes))
	statuses, errs := make([]string, len(outcomes)), make([]string, len(outcomes))
	at := make([]time.Time, len(outcomes))
	for i, o := range outcomes {
		ids[i], statuses[i], errs[i], at[i] = o.EventID, o.Status, o.Error, o.FailedAt
	}
	if _, err := s.db.Exec(ctx, deadLetterDoneSQL, ids, statuses, errs, at, retryAfter.Milliseconds(), s.now()); err != nil {
		return fmt.Errorf("recording %d dead letters: %w", len(outcomes), err)
	}
	return nil
}
