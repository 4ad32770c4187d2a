package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
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
	f.search(fs)
	fs.String(&after, "after", "", "page: list only events after this place (the previous page says it: the last one's failed_at,event_id; "+
		"an event id alone is the place of its last change)")
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
		n, _, err := st.CountFailed(ctx, filter, 0, 0)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, n)
		return nil
	}
	var cursor *store.FailedCursor
	if after != "" {
		c, placed, err := store.ParseFailedCursor(after)
		if err != nil {
			return flagenv.Usagef("--after %q: %v", after, err)
		}
		if !placed {
			if c, err = st.FailedCursorOf(ctx, c.ID); err != nil {
				return fmt.Errorf("--after %s: %w", after, err)
			}
		}
		cursor = &c
	}
	list, err := st.FailedPage(ctx, filter, cursor, false, out.limit)
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

// writeJSONLines writes one JSON object per line, with the characters a
// terminal acts on escaped (termsafe.JSON).
func writeJSONLines[T any](w io.Writer, list []T) error {
	for _, v := range list {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(termsafe.JSON(b), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// row writes a row of a table to tw: its cells, each escaped
// (termsafe.String) so that text from the database can neither drive the
// terminal nor end the row or add a column, separated by tabs.
func row(tw io.Writer, cells ...any) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(termsafe.String(fmt.Sprint(c)))
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(tw, b.String()) //nolint:errcheck // the tabwriter's Flush reports it
}

// writeFailedTable writes a page of failed events for a person, and on
// stderr how to get the next page when there may be one.
func writeFailedTable(stdout, stderr io.Writer, list []store.Failed, limit int) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tTOPIC\tKEY\tEVENT TYPE\tREASON\tATTEMPTS\tFAILED AT\tLAST ERROR")
	for _, f := range list {
		row(tw, f.EventID, f.Topic, f.Key, f.EventType, f.Reason, f.Attempts, f.FailedAt.UTC().Format(time.RFC3339),
			oneLine(f.LastError, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == limit {
		fmt.Fprintf(stderr, "more may follow: --after %s\n", termsafe.String(list[len(list)-1].Cursor().String()))
	}
	return nil
}

// oneLine is s on one line, at most n bytes (cut before a character).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n - 1
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "…"
	}
	return s
}
