package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

func heldCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("held", getenv)
	fs.Describe("", "", "Keys held behind a FAILED event or a retry, with the event that blocks each and how many wait.")
	var dbURL, topic string
	var out listing
	databaseFlag(fs, &dbURL)
	fs.String(&topic, "topic", "", "only keys of this topic")
	out.register(fs, "at most this many keys, longest held first")
	if err := parse(fs, args, stdout, stderr); err != nil {
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
	defer func() { err = operatorDenied(ctx, st, err) }()
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
		row(tw, h.Topic, h.Key, h.BlockingEventID, h.Status, h.Reason, h.Attempts, h.Since.UTC().Format(time.RFC3339), h.Queued,
			oneLine(h.LastError, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(stderr, "no held keys")
	}
	return nil
}
