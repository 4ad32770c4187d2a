package store

import (
	"cmp"
	"context"
	_ "embed" // the statements
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/events_page.sql
	eventsPageSQL string
	//go:embed sql/events_walk_end.sql
	eventsWalkEndSQL string
	//go:embed sql/events_page_key.sql
	eventsPageKeySQL string
	//go:embed sql/events_key_walk_end.sql
	eventsKeyWalkEndSQL string
	//go:embed sql/event.sql
	eventSQL string
	//go:embed sql/attempts.sql
	attemptsSQL string
	//go:embed sql/events_count.sql
	eventsCountSQL string
)

// CountEvents counts the status rows f selects, up to bound, when f is a
// status other than SENT, or a reason, and nothing else (each from its
// index); ok is false for any other filter, which it does not count
// (reading each row's event, or most of the table).
func (s *Store) CountEvents(ctx context.Context, f EventFilter, bound int) (n int64, ok bool, err error) {
	if f.Topic != "" || f.Key != "" || f.EventType != "" || f.Since != nil || f.Until != nil ||
		(f.Reason == "" && (f.Status == "" || f.Status == "SENT")) {
		return 0, false, nil
	}
	if err := s.db.QueryRow(ctx, eventsCountSQL, pgx.QueryExecModeExec, nullable(f.Status), nullable(f.Reason), bound).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("counting events: %w", err)
	}
	return n, true, nil
}

// EventFilter selects status rows for the console; zero fields match
// anything.
type EventFilter struct {
	Status, Topic, Key, EventType, Reason string
	// Since and Until bound the rows' last change.
	Since, Until *time.Time
}

// EventRow is one status row with its event's topic, key and type.
type EventRow struct {
	EventID, Status, Topic, Key, EventType, Reason, LastError string
	Attempts                                                  int
	UpdatedAt                                                 time.Time
	Source                                                    string // outbox.events or a mapped table
}

// EventsPage is a page of the console's event list.
type EventsPage struct {
	Rows []EventRow
	// Before is where the next page starts (its before; its after, oldest
	// first), "" when the walk reached the last row.
	Before string
	// Walked says the page holds fewer rows than asked because it read as
	// many rows as it may (walk) without finding them: the next page goes
	// on searching from Before.
	Walked bool
}

// EventsWalkDefault is how many status rows (or events of a key) one
// page of the event list reads at most to find its rows: a filter that
// few rows match pages through a big table in bounded steps.
const EventsWalkDefault = 20000

// The event list's statements oldest first: the same, after $1 instead
// of before it, in ascending order.
var (
	eventsPageOldestSQL       = oldestFirst(eventsPageSQL, 3)
	eventsWalkEndOldestSQL    = oldestFirst(eventsWalkEndSQL, 2)
	eventsPageKeyOldestSQL    = oldestFirst(eventsPageKeySQL, 6)
	eventsKeyWalkEndOldestSQL = oldestFirst(eventsKeyWalkEndSQL, 5)
)

// oldestFirst turns a statement of the event list, which reads newest
// first before event $1, into one that reads oldest first after it; n is
// how many places change (a statement changed without this is refused at
// start).
func oldestFirst(sql string, n int) string {
	if strings.Count(sql, " < $1)")+strings.Count(sql, " DESC") != n {
		panic("store: an event list statement no longer reads as oldestFirst expects")
	}
	return strings.ReplaceAll(strings.ReplaceAll(sql, " < $1)", " > $1)"), " DESC", " ASC")
}

// EventsPage lists up to limit status rows matching f, newest event id
// first, before the event with id from ("" for the first page); oldest
// first after it when oldest. It reads at most walk rows
// (EventsWalkDefault when 0) to find them. A key filter walks the key's
// events (their key index); the others walk the status rows, by status or
// reason from their indexes.
func (s *Store) EventsPage(ctx context.Context, f EventFilter, from string, oldest bool, limit, walk int) (*EventsPage, error) {
	walk = cmp.Or(walk, EventsWalkDefault)
	before := from
	pageSQL, keyEndSQL, endSQL := eventsPageSQL, eventsKeyWalkEndSQL, eventsWalkEndSQL
	if f.Key != "" {
		pageSQL = eventsPageKeySQL
	}
	if oldest {
		pageSQL, keyEndSQL, endSQL = eventsPageOldestSQL, eventsKeyWalkEndOldestSQL, eventsWalkEndOldestSQL
		if f.Key != "" {
			pageSQL = eventsPageKeyOldestSQL
		}
	}
	// QueryExecModeExec: planned for these values, so that a NULL filter
	// drops out and the right index is used.
	rows, err := collect(ctx, s.db, "listing events", func(r pgx.CollectableRow) (EventRow, error) {
		var x EventRow
		err := r.Scan(&x.EventID, &x.Status, &x.Topic, &x.Key, &x.EventType, &x.Reason, &x.LastError, &x.Attempts,
			&x.UpdatedAt, &x.Source)
		return x, err
	}, pageSQL, pgx.QueryExecModeExec, nullable(before), nullable(f.Status), nullable(f.Topic), nullable(f.Key),
		nullable(f.EventType), nullable(f.Reason), f.Since, f.Until, limit+1, walk)
	if err != nil {
		return nil, err
	}
	p := &EventsPage{Rows: rows}
	if len(rows) > limit {
		p.Rows = rows[:limit]
		p.Before = p.Rows[limit-1].EventID
		return p, nil
	}
	var end string
	if f.Key != "" {
		err = s.db.QueryRow(ctx, keyEndSQL, pgx.QueryExecModeExec, nullable(before), f.Key, walk).Scan(&end)
	} else {
		err = s.db.QueryRow(ctx, endSQL, pgx.QueryExecModeExec, nullable(before), nullable(f.Status),
			nullable(f.Reason), walk).Scan(&end)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the walk reached the oldest row
	case err != nil:
		return nil, fmt.Errorf("listing events: where the walk ended: %w", err)
	default:
		p.Before, p.Walked = end, true
	}
	return p, nil
}

// EventDetail is an event's status row and what is left of the event.
type EventDetail struct {
	EventRow
	MaxAttempts    int
	CreatedAt      time.Time  // the status row's
	NextAttemptAt  *time.Time // PENDING rows
	SentAt         *time.Time
	Partition      *int32
	Offset         *int64
	LockedBy       string
	Headers        string     // JSON: an object (outbox.events) or [[name, value], ...] (a kept record)
	EventCreatedAt *time.Time // outbox.events' created_at
	Payload        []byte     // the event's payload or the kept record's value
	EventKept      bool       // the event or its record is still there
	// DeadLetter is how its last failure went on the dead-letter topic
	// (SENT, FAILED, "" for not there), and when, and why it failed.
	DeadLetter      string
	DeadLetteredAt  *time.Time
	DeadLetterError string
}

// ErrNoEvent says there is no status row for the event.
var ErrNoEvent = errors.New("no status row for this event")

// Event reads one event's status row and what is left of the event.
func (s *Store) Event(ctx context.Context, id string) (*EventDetail, error) {
	var d EventDetail
	err := s.db.QueryRow(ctx, eventSQL, id).Scan(&d.EventID, &d.Status, &d.Attempts, &d.MaxAttempts, &d.Reason, &d.LastError,
		&d.CreatedAt, &d.UpdatedAt, &d.NextAttemptAt, &d.SentAt, &d.Partition, &d.Offset, &d.LockedBy, &d.Source,
		&d.Topic, &d.Key, &d.EventType, &d.Headers, &d.EventCreatedAt, &d.Payload, &d.EventKept,
		&d.DeadLetter, &d.DeadLetteredAt, &d.DeadLetterError)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNoEvent
	case err != nil:
		return nil, fmt.Errorf("reading event %s: %w", id, err)
	}
	return &d, nil
}

// AttemptsKept is how many failed attempts each event keeps in
// outbox.delivery_attempts (its last ones): the statements that record a
// failure trim the older ones (record_outcomes.sql, rescue_stuck.sql).
const AttemptsKept = 10

// Attempt is one failed delivery attempt of an event.
type Attempt struct {
	// Attempt is the status row's attempts after it (a resend starts over).
	Attempt  int       `json:"attempt"`
	FailedAt time.Time `json:"failed_at"`
	// Reason is why it ended FAILED; "": it was to be retried.
	Reason string `json:"failure_reason,omitempty"`
	Error  string `json:"error"`
}

// Attempts reads an event's failed attempts, newest first (its last
// AttemptsKept).
func (s *Store) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	return collect(ctx, s.db, "reading attempts of event "+id, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		return a, r.Scan(&a.Attempt, &a.FailedAt, &a.Reason, &a.Error)
	}, attemptsSQL, id)
}
