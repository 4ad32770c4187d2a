package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

func skipCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := newFlags("skip", getenv)
	fs.Describe("ID...", "event ids (UUIDs) of FAILED events; or none, with --failed",
		"Give up on FAILED events: they become SKIPPED, are never delivered, and release their keys.\n"+
			"With --failed instead of ids, every FAILED event matching the filters.")
	var dbURL string
	var t targets
	databaseFlag(fs, &dbURL)
	t.register(fs, "skip")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	filter, err := t.check(fs, time.Now())
	if err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	if t.failed {
		n, err := st.SkipFailed(ctx, filter)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "skipped %d failed events\n", n)
		return nil
	}
	refused := 0
	for _, id := range t.ids {
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
	fmt.Fprintf(stdout, "skipped %d events\n", len(t.ids)-refused)
	if refused > 0 {
		return fmt.Errorf("%d of %d events were not skipped", refused, len(t.ids))
	}
	return nil
}
