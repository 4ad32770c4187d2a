package store

import (
	"context"
	_ "embed" // the statements
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/failed_page.sql
	failedPageSQL string
	//go:embed sql/failed_page_newest.sql
	failedPageNewestSQL string
	//go:embed sql/failed_count.sql
	failedCountSQL string
	//go:embed sql/failed_count_type.sql
	failedCountTypeSQL string
	//go:embed sql/failed_search_floor.sql
	failedSearchFloorSQL string
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
	// Key is the events' key; ErrorContains a text their last error
	// contains (case-sensitive). Neither is in an index of the FAILED rows
	// (nor is the event type): the console bounds such a search
	// (SearchFloor).
	Key, ErrorContains string
}

// searched says whether f has a filter no index of the FAILED rows reads:
// the event type, the key or the error's text.
func (f FailedFilter) searched() bool {
	return f.EventType != "" || f.Key != "" || f.ErrorContains != ""
}

func (f FailedFilter) args() []any {
	return []any{nullable(f.Topic), nullable(f.EventType), nullable(f.Reason), f.Since, f.Until, nullable(f.Key),
		nullable(f.ErrorContains)}
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

// FailedCursor is a place in the order of FAILED events (failed_at, then
// event id): a page goes on from it whatever became of the event there.
type FailedCursor struct {
	At time.Time
	ID string
}

// String is the cursor as ParseFailedCursor reads it: its time (RFC 3339,
// UTC, nanoseconds), a comma, its event id.
func (c FailedCursor) String() string {
	return c.At.UTC().Format(time.RFC3339Nano) + "," + c.ID
}

// ErrBadCursor is a cursor that is neither "time,event id" nor an event id.
var ErrBadCursor = errors.New("not a page cursor: an event id, or a time (RFC 3339) and an event id after a comma")

// ParseFailedCursor reads a FailedCursor's String. An event id alone is a
// cursor too (the CLI's --after of earlier releases): ok is false, and
// FailedCursorOf finds its place.
func ParseFailedCursor(s string) (c FailedCursor, ok bool, err error) {
	at, id, found := strings.Cut(s, ",")
	if !found {
		if !uuidText.MatchString(s) {
			return c, false, ErrBadCursor
		}
		return FailedCursor{ID: s}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || !uuidText.MatchString(id) {
		return c, false, ErrBadCursor
	}
	return FailedCursor{At: t, ID: strings.ToLower(id)}, true, nil
}

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// FailedCursorOf is the place of event id in the order of FAILED events:
// its status row's last change, whatever its status now (ErrNoEvent when
// it has none).
func (s *Store) FailedCursorOf(ctx context.Context, id string) (FailedCursor, error) {
	c := FailedCursor{ID: id}
	err := s.db.QueryRow(ctx, `SELECT updated_at FROM outbox.deliveries WHERE event_id = $1::uuid`, id).Scan(&c.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNoEvent
	}
	if err != nil {
		return c, fmt.Errorf("finding event %s: %w", id, err)
	}
	return c, nil
}

// FailedPage lists up to limit FAILED events matching f after cursor (nil:
// from the first), oldest failure first, or newest first when newest.
func (s *Store) FailedPage(ctx context.Context, f FailedFilter, after *FailedCursor, newest bool, limit int) ([]Failed, error) {
	sql, at, id := failedPageSQL, (*time.Time)(nil), (*string)(nil)
	if newest {
		sql = failedPageNewestSQL
	}
	if after != nil {
		at, id = &after.At, &after.ID
	}
	return collect(ctx, s.db, "listing failed events", func(r pgx.CollectableRow) (Failed, error) {
		var x Failed
		err := r.Scan(&x.EventID, &x.Topic, &x.Key, &x.EventType, &x.Reason, &x.LastError, &x.Attempts, &x.FailedAt,
			&x.DeadLetter, &x.DeadLetterError)
		return x, err
	}, sql, append(append([]any{pgx.QueryExecModeExec}, f.args()...), at, id, limit)...)
}

// SearchFloor is, when more than walk FAILED rows match f's topic, reason
// and failure times (the filters the indexes read), the failure time of
// the walk-th newest of them; nil when walk or fewer match. The console
// searches by event type, key or error text only among the FAILED events that failed
// at or after it: it raises the filter's Since to it, so that the list,
// its count and the actions on all matching read the same rows.
func (s *Store) SearchFloor(ctx context.Context, f FailedFilter, walk int) (*time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, failedSearchFloorSQL, pgx.QueryExecModeExec, nullable(f.Topic), nullable(f.Reason), f.Since, f.Until,
		walk-1).Scan(&at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("bounding the search of failed events: %w", err)
	}
	return &at, nil
}

// Cursor is the place of x in the order of FAILED events.
func (x Failed) Cursor() FailedCursor { return FailedCursor{At: x.FailedAt, ID: x.EventID} }

// CountFailed counts the FAILED events matching f, up to limit (0: all).
// With an event type (read from each event, not from the status row), a
// key or an error's text, it counts among the newest walk FAILED rows
// matching the rest of f (0: all): walked says it stopped there, so older
// ones may match too.
func (s *Store) CountFailed(ctx context.Context, f FailedFilter, limit, walk int) (n int64, walked bool, err error) {
	bound := func(n int) *int {
		if n > 0 {
			return &n
		}
		return nil
	}
	if !f.searched() {
		if err := s.db.QueryRow(ctx, failedCountSQL, pgx.QueryExecModeExec, nullable(f.Topic), nullable(f.Reason), f.Since, f.Until,
			bound(limit)).Scan(&n); err != nil {
			return 0, false, fmt.Errorf("counting failed events: %w", err)
		}
		return n, false, nil
	}
	var rows int64
	if err := s.db.QueryRow(ctx, failedCountTypeSQL, append(append([]any{pgx.QueryExecModeExec}, f.args()...), bound(walk))...).
		Scan(&n, &rows); err != nil {
		return 0, false, fmt.Errorf("counting failed events: %w", err)
	}
	return n, walk > 0 && rows >= int64(walk), nil
}

// CountFailedIDs counts the events of ids that are FAILED (for reason;
// "": any).
func (s *Store) CountFailedIDs(ctx context.Context, ids []string, reason string) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries WHERE event_id = ANY($1::uuid[]) AND status = 'FAILED'
		AND ($2::text IS NULL OR failure_reason = $2)`, ids, nullable(reason)).Scan(&n); err != nil {
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
	err := s.db.QueryRow(ctx, `SELECT outbox.resend_failed($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		nullable(f.Topic), nullable(f.EventType), f.CreatedFrom, f.CreatedTo, nullable(f.Reason), f.Since, f.Until,
		nullable(f.Key), nullable(f.ErrorContains)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("resending failed events: %w", err)
	}
	return n, nil
}

// SkipFailed gives up on every FAILED event matching f (SKIPPED), through
// outbox.skip_failed, and returns how many.
func (s *Store) SkipFailed(ctx context.Context, f FailedFilter) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT outbox.skip_failed($1, $2, $3, $4, $5, $6, $7)`,
		nullable(f.Topic), nullable(f.EventType), nullable(f.Reason), f.Since, f.Until, nullable(f.Key),
		nullable(f.ErrorContains)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("skipping failed events: %w", err)
	}
	return n, nil
}
