package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func failedCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("failed", getenv)
	fs.Describe("", "", "List or count FAILED events, oldest failure first, a page at a time.")
	var dbURL, after string
	var out listing
	var count bool
	var f filterFlags
	databaseFlag(fs, &dbURL)
	f.register(fs, "failed")
	fs.String(&after, "after", "", "page: list only events after this event id (the last one of the previous page)")
	out.register(fs, "at most this many events")
	fs.Bool(&count, "count", false, "print only how many failed events match")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	filter, err := f.failed(time.Now())
	if err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	defer func() { err = operatorDenied(ctx, st, err) }()
	if count {
		n, err := st.CountFailed(ctx, filter, 0)
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
	fs.Int(&l.limit, "limit", 50, limitUsage)
	fs.String(&l.format, "format", "table", "table or json (one object per line)")
}

func (l *listing) check() error {
	if err := checkFormat(l.format); err != nil {
		return err
	}
	if l.limit < 1 {
		return flagenv.Usagef("--limit must be at least 1")
	}
	return nil
}

func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return flagenv.Usagef("--format: %q is not table or json", format)
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
