package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

// Held keys: the events queued behind each are counted up to
// heldQueuedBound, and the keys up to heldCountBound (past either, "≥"),
// as the console's held keys page does.
const (
	heldQueuedBound = 10000
	heldCountBound  = 10000
)

func heldCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("held", getenv)
	fs.Describe("", "", "Keys held behind a FAILED event or a retry, in topic and key order, with the event that blocks each and "+
		"how many wait, a page at a time, and how many keys are held.")
	var dbURL, topic, afterTopic, afterKey string
	var out listing
	databaseFlag(fs, &dbURL)
	fs.String(&topic, "topic", "", "only keys of this topic")
	fs.String(&afterTopic, "after-topic", "", "page: list only keys after this topic and --after-key (the previous page prints them)")
	fs.String(&afterKey, "after-key", "", "page: with --after-topic, list only keys after this one of that topic")
	out.register(fs, "at most this many keys")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	var after *store.HeldCursor
	switch {
	case afterTopic != "":
		after = &store.HeldCursor{Topic: afterTopic, Key: afterKey}
	case afterKey != "":
		return flagenv.Usagef("--after-key goes with --after-topic")
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	defer func() { err = operatorDenied(ctx, st, err) }()
	list, err := st.HeldKeysPage(ctx, topic, after, out.limit, heldQueuedBound)
	if err != nil {
		return err
	}
	total, err := st.CountHeldKeys(ctx, topic, heldCountBound)
	if err != nil {
		return err
	}
	if out.format == "json" {
		if err := writeJSONLines(stdout, list); err != nil {
			return err
		}
	} else if err := writeHeldTable(stdout, list); err != nil {
		return err
	}
	if total == 0 {
		fmt.Fprintf(stderr, "no held keys%s\n", ofTopic(topic))
	} else {
		fmt.Fprintf(stderr, "%s held keys%s\n", bounded(total, heldCountBound), ofTopic(topic))
	}
	if len(list) == out.limit {
		last := list[len(list)-1]
		fmt.Fprintf(stderr, "more may follow: --after-topic %s --after-key %s\n", termsafe.String(shellQuote(last.Topic)),
			termsafe.String(shellQuote(last.Key)))
	}
	return nil
}

func writeHeldTable(stdout io.Writer, list []store.HeldKey) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tKEY\tBLOCKING EVENT\tSTATUS\tREASON\tATTEMPTS\tSINCE\tQUEUED\tLAST ERROR")
	for _, h := range list {
		row(tw, h.Topic, h.Key, h.BlockingEventID, h.Status, h.Reason, h.Attempts, h.Since.UTC().Format(time.RFC3339),
			bounded(h.Queued, heldQueuedBound), oneLine(h.LastError, 100))
	}
	return tw.Flush()
}

// bounded is a count of up to bound: "≥ bound" when it reached it.
func bounded(n int64, bound int) string {
	if n >= int64(bound) {
		return fmt.Sprintf("≥ %d", bound)
	}
	return fmt.Sprint(n)
}

func ofTopic(topic string) string {
	if topic == "" {
		return ""
	}
	return " of topic " + termsafe.String(topic)
}

// shellQuote quotes s for a POSIX shell, so that the next page's flags can
// be pasted.
func shellQuote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += `'\''`
			continue
		}
		out += string(r)
	}
	return out + "'"
}
