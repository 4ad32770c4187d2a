package store

import (
	"context"
	_ "embed" // the statements
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/failed_page.sql
	failedPageSQL string
	//go:embed sql/failed_count.sql
	failedCountSQL string
	//go:embed sql/resend_if_failed.sql
	resendIfFailedSQL string
)

// FailedFilter selects FAILED events; zero fields match anything.
type FailedFilter struct {
	Topic, EventType, Reason string
	// Since and Until bound when the events failed (failed_at).
	Since, Until *time.Time
	// CreatedFrom and CreatedTo bound the events' created_at (ResendFailed
	// only: resend's --from and --to of earlier releases).
	CreatedFrom, CreatedTo *time.Time
}

func (f FailedFilter) args() []any {
	return []any{nullable(f.Topic), nullable(f.EventType), nullable(f.Reason), f.Since, f.Until}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Failed is a FAILED event with what an operator needs to decide.
type Failed struct {
	EventID   string    `json:"event_id"`
	Topic     string    `json:"topic"`
	Key       string    `json:"key"`
	EventType string    `json:"event_type"`
	Reason    string    `json:"failure_reason"`
	LastError string    `json:"last_error"`
	Attempts  int       `json:"attempts"`
	FailedAt  time.Time `json:"failed_at"`
	// DeadLetter is how this failure went on the dead-letter topic: SENT,
	// FAILED (DeadLetterError says why), or "" (not published there).
	DeadLetter      string `json:"dead_letter_status,omitempty"`
	DeadLetterError string `json:"dead_letter_error,omitempty"`
}

// FailedPage lists up to limit FAILED events matching f, oldest failure
// first, after the event with id after ("" for the first page).
func (s *Store) FailedPage(ctx context.Context, f FailedFilter, after string, limit int) ([]Failed, error) {
	return collect(ctx, s.db, "listing failed events", func(r pgx.CollectableRow) (Failed, error) {
		var x Failed
		err := r.Scan(&x.EventID, &x.Topic, &x.Key, &x.EventType, &x.Reason, &x.LastError, &x.Attempts, &x.FailedAt,
			&x.DeadLetter, &x.DeadLetterError)
		return x, err
	}, failedPageSQL, append(f.args(), nullable(after), limit)...)
}

// CountFailed counts the FAILED events matching f, up to limit (0: all).
func (s *Store) CountFailed(ctx context.Context, f FailedFilter, limit int) (int64, error) {
	var n int64
	var bound *int
	if limit > 0 {
		bound = &limit
	}
	if err := s.db.QueryRow(ctx, failedCountSQL, append(f.args(), bound)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting failed events: %w", err)
	}
	return n, nil
}

// Resend makes an event due now with its attempts reset, through
// outbox.resend; ok is false when the event does not exist.
func (s *Store) Resend(ctx context.Context, eventID string) (ok bool, err error) {
	if err := s.db.QueryRow(ctx, `SELECT outbox.resend($1::uuid)`, eventID).Scan(&ok); err != nil {
		return false, fmt.Errorf("resending %s: %w", eventID, err)
	}
	return ok, nil
}

// ResendIfFailed resends the event if it is FAILED; status is its status
// before ("" when it has no status row), which says why it was not.
func (s *Store) ResendIfFailed(ctx context.Context, eventID string) (resent bool, status string, err error) {
	if err := s.db.QueryRow(ctx, resendIfFailedSQL, eventID).Scan(&resent, &status); err != nil {
		return false, "", fmt.Errorf("resending %s: %w", eventID, err)
	}
	return resent, status, nil
}

// ResendFailed resends every FAILED event matching f, through
// outbox.resend_failed, and returns how many.
func (s *Store) ResendFailed(ctx context.Context, f FailedFilter) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT outbox.resend_failed($1, $2, $3, $4, $5, $6, $7)`,
		nullable(f.Topic), nullable(f.EventType), f.CreatedFrom, f.CreatedTo, nullable(f.Reason), f.Since, f.Until).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("resending failed events: %w", err)
	}
	return n, nil
}

// SkipFailed gives up on every FAILED event matching f (SKIPPED), through
// outbox.skip_failed, and returns how many.
func (s *Store) SkipFailed(ctx context.Context, f FailedFilter) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT outbox.skip_failed($1, $2, $3, $4, $5)`,
		nullable(f.Topic), nullable(f.EventType), nullable(f.Reason), f.Since, f.Until).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("skipping failed events: %w", err)
	}
	return n, nil
}
