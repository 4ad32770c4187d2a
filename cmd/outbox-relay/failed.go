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
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

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

// filter returns the store's filter; --since and --until bound failed_at.
func (f *failedFilter) filter(now time.Time) (store.FailedFilter, error) {
	since, until, err := parseRange(now, "--since", f.since, "--until", f.until)
	return store.FailedFilter{Topic: f.topic, EventType: f.eventType, Reason: strings.ToUpper(f.reason),
		Since: since, Until: until}, err
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

// dial connects to --database-url.
func dial(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	if dbURL == "" {
		return nil, fmt.Errorf("--database-url is required (or OUTBOX_DATABASE_URL)")
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", pgdial.Explain(err))
	}
	return conn, nil
}

// connect opens a store on one connection; close it with the returned func.
func connect(ctx context.Context, dbURL string) (*store.Store, func(), error) {
	conn, err := dial(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	return store.New(conn), func() { conn.Close(context.WithoutCancel(ctx)) }, nil
}

func failedCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("failed", getenv)
	fs.SetOutput(stderr)
	var dbURL, after string
	var out listing
	var count bool
	var f failedFilter
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	f.register(fs)
	fs.StringVar(&after, "after", "", "page: list only events after this event id (the last one of the previous page)")
	out.register(fs, "at most this many events")
	fs.BoolVar(&count, "count", false, "print only how many failed events match")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	filter, err := f.filter(time.Now())
	if err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	if count {
		n, err := st.CountFailed(ctx, filter)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, n)
		return nil
	}
	list, err := st.FailedPage(ctx, filter, after, out.limit)
	if err != nil {
		return err
	}
	if out.format == "json" {
		return writeJSONLines(stdout, list)
	}
	return writeFailedTable(stdout, stderr, list, out.limit)
}

// listing is the output flags of the commands that list rows.
type listing struct {
	format string
	limit  int
}

func (l *listing) register(fs *flagenv.Set, limitUsage string) {
	fs.IntVar(&l.limit, "limit", 50, limitUsage)
	fs.StringVar(&l.format, "format", "table", "table or json (one object per line)")
}

func (l *listing) check() error {
	if err := checkFormat(l.format); err != nil {
		return err
	}
	if l.limit < 1 {
		return fmt.Errorf("--limit must be at least 1")
	}
	return nil
}

func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("--format: %q is not table or json", format)
	}
	return nil
}

// writeJSONLines writes one JSON object per line.
func writeJSONLines[T any](w io.Writer, list []T) error {
	enc := json.NewEncoder(w)
	for _, v := range list {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// writeFailedTable writes a page of failed events for a person, and on
// stderr how to get the next page when there may be one.
func writeFailedTable(stdout, stderr io.Writer, list []store.Failed, limit int) error {
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
