package main

import (
	"context"
	"io"
	"time"
)

func skipCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
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
	defer func() { err = operatorDenied(ctx, st, err) }()
	return t.apply(stdout, stderr, "skipped", func() (int64, error) { return st.SkipFailed(ctx, filter) },
		func(id string) (string, error) {
			skipped, status, err := st.Skip(ctx, id)
			switch {
			case err != nil, skipped:
				return "", err
			case status == "":
				return "no such event with a status row", nil
			}
			return "is " + status + "; only FAILED events can be skipped", nil
		})
}
