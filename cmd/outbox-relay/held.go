package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

func heldCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("held", getenv)
	fs.SetOutput(stderr)
	var dbURL, topic string
	var out listing
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	fs.StringVar(&topic, "topic", "", "only this topic")
	out.register(fs, "at most this many keys, longest held first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	list, err := st.HeldKeys(ctx, topic, out.limit)
	if err != nil {
		return err
	}
	if out.format == "json" {
		return writeJSONLines(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tKEY\tBLOCKING EVENT\tSTATUS\tREASON\tATTEMPTS\tSINCE\tQUEUED\tLAST ERROR")
	for _, h := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n", h.Topic, h.Key, h.BlockingEventID, h.Status, h.Reason,
			h.Attempts, h.Since.UTC().Format(time.RFC3339), h.Queued, oneLine(h.LastError, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(stderr, "no held keys")
	}
	return nil
}

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

func skipCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("skip", getenv)
	fs.SetOutput(stderr)
	var dbURL string
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	// Event ids come after the flags.
	if err := fs.FlagSet.Parse(args); err != nil {
		return err
	}
	ids := fs.Args()
	if len(ids) == 0 {
		return errors.New("give the ids of the FAILED events to skip (outbox-relay skip ID ...)")
	}
	for _, id := range ids {
		if !uuidText.MatchString(id) {
			return fmt.Errorf("%q is not an event id (a UUID)", id)
		}
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	refused := 0
	for _, id := range ids {
		skipped, status, err := st.Skip(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case skipped:
			continue
		case status == "":
			fmt.Fprintf(stderr, "%s: no such event with a status row\n", id)
		default:
			fmt.Fprintf(stderr, "%s: is %s; only FAILED events can be skipped\n", id, status)
		}
		refused++
	}
	fmt.Fprintf(stdout, "skipped %d events\n", len(ids)-refused)
	if refused > 0 {
		return fmt.Errorf("%d of %d events were not skipped", refused, len(ids))
	}
	return nil
}
