package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

// failedSQL pages through outbox.failed_events, newest last, after a given
// event (keyset on failed_at, event_id), with optional filters.
const failedSQL = `
SELECT event_id::text, topic, coalesce(key, ''), coalesce(event_type, ''), failure_reason, coalesce(last_error, ''),
       attempts, failed_at
FROM outbox.failed_events f
WHERE ($1::text IS NULL OR topic = $1)
  AND ($2::text IS NULL OR event_type = $2)
  AND ($3::text IS NULL OR failure_reason = $3)
  AND ($4::timestamptz IS NULL OR failed_at >= $4)
  AND ($5::timestamptz IS NULL OR failed_at < $5)
  AND ($6::uuid IS NULL OR (failed_at, event_id) >
       (SELECT failed_at, event_id FROM outbox.failed_events WHERE event_id = $6))
ORDER BY failed_at, event_id
LIMIT $7`

const failedCountSQL = `
SELECT count(*) FROM outbox.failed_events
WHERE ($1::text IS NULL OR topic = $1)
  AND ($2::text IS NULL OR event_type = $2)
  AND ($3::text IS NULL OR failure_reason = $3)
  AND ($4::timestamptz IS NULL OR failed_at >= $4)
  AND ($5::timestamptz IS NULL OR failed_at < $5)`

// failedFilter is the filter the failed and resend commands share.
type failedFilter struct {
	topic, eventType, reason, since, until string
}

func (f *failedFilter) register(fs *flagenv.Set) {
	fs.StringVar(&f.topic, "topic", "", "only this topic")
	fs.StringVar(&f.eventType, "event-type", "", "only this event_type")
	fs.StringVar(&f.reason, "reason", "", "only this failure_reason (INVALID_TOPIC, MESSAGE_TOO_LARGE, ...)")
	fs.StringVar(&f.since, "since", "", "failed at or after: RFC 3339 time, or a duration ago such as 2h")
	fs.StringVar(&f.until, "until", "", "failed before: RFC 3339 time, or a duration ago such as 30m")
}

// args returns the filter as SQL parameters ($1 to $5 above).
func (f *failedFilter) args(now time.Time) ([]any, error) {
	since, until, err := parseRange(now, "--since", f.since, "--until", f.until)
	if err != nil {
		return nil, err
	}
	return []any{nullable(f.topic), nullable(f.eventType), nullable(strings.ToUpper(f.reason)), since, until}, nil
}

// parseRange reads a from/to pair of flags (see parseWhen).
func parseRange(now time.Time, fromFlag, from, toFlag, to string) (*time.Time, *time.Time, error) {
	f, err := parseWhen(fromFlag, from, now)
	if err != nil {
		return nil, nil, err
	}
	t, err := parseWhen(toFlag, to, now)
	return f, t, err
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func parseWhen(flag, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, fmt.Errorf("%s: %q is neither an RFC 3339 time nor a duration such as 2h", flag, v)
}

func connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	if dbURL == "" {
		return nil, fmt.Errorf("--database-url is required (or OUTBOX_DATABASE_URL)")
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return conn, nil
}

func failedCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("failed", getenv)
	fs.SetOutput(stderr)
	var dbURL, after, format string
	var limit int
	var count bool
	var f failedFilter
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	f.register(fs)
	fs.StringVar(&after, "after", "", "page: list only events after this event id (the last one of the previous page)")
	fs.IntVar(&limit, "limit", 50, "at most this many events")
	fs.BoolVar(&count, "count", false, "print only how many failed events match")
	fs.StringVar(&format, "format", "table", "table or json (one object per line)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if format != "table" && format != "json" {
		return fmt.Errorf("--format: %q is not table or json", format)
	}
	if limit < 1 {
		return fmt.Errorf("--limit must be at least 1")
	}
	params, err := f.args(time.Now())
	if err != nil {
		return err
	}
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if count {
		var n int64
		if err := conn.QueryRow(ctx, failedCountSQL, params...).Scan(&n); err != nil {
			return fmt.Errorf("counting failed events: %w", err)
		}
		fmt.Fprintln(stdout, n)
		return nil
	}
	rows, err := conn.Query(ctx, failedSQL, append(params, nullable(after), limit)...)
	if err != nil {
		return fmt.Errorf("listing failed events: %w", err)
	}
	type failed struct {
		EventID   string    `json:"event_id"`
		Topic     string    `json:"topic"`
		Key       string    `json:"key"`
		EventType string    `json:"event_type"`
		Reason    string    `json:"failure_reason"`
		LastError string    `json:"last_error"`
		Attempts  int       `json:"attempts"`
		FailedAt  time.Time `json:"failed_at"`
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (failed, error) {
		var f failed
		err := r.Scan(&f.EventID, &f.Topic, &f.Key, &f.EventType, &f.Reason, &f.LastError, &f.Attempts, &f.FailedAt)
		return f, err
	})
	if err != nil {
		return fmt.Errorf("listing failed events: %w", err)
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		for _, f := range list {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tTOPIC\tKEY\tEVENT TYPE\tREASON\tATTEMPTS\tFAILED AT\tLAST ERROR")
	for _, f := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", f.EventID, f.Topic, f.Key, f.EventType, f.Reason,
			f.Attempts, f.FailedAt.UTC().Format(time.RFC3339), oneLine(f.LastError, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == limit {
		fmt.Fprintf(stderr, "more may follow: --after %s\n", list[len(list)-1].EventID)
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
