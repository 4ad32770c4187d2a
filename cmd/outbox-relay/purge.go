package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func purgeCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("purge", getenv)
	fs.Describe("", "", "Delete SENT (or FAILED, SKIPPED) events created longer ago than --older-than, with their status\n"+
		"rows, a batch per short transaction. PENDING and PROCESSING events are never purged.")
	// Before this release purge read OUTBOX_OLDER_THAN, OUTBOX_STATUS,
	// OUTBOX_TOPIC and OUTBOX_BATCH, which a deployment's variables for
	// other commands could set.
	fs.Legacy("older-than", "status", "topic", "batch")
	var dbURL, status string
	var olderThan time.Duration
	var batch int
	var f filterFlags
	databaseFlag(fs, &dbURL)
	fs.Duration(&olderThan, "older-than", 0, "delete events created longer ago than this, such as 7d or 24h")
	fs.Required("older-than")
	fs.String(&status, "status", "SENT", "SENT, FAILED or SKIPPED: the delivery status of the events to delete")
	f.register(fs, "created")
	fs.Int(&batch, "batch", 1000, "events per statement (each statement is its own short transaction)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	status = strings.ToUpper(status)
	switch {
	case olderThan <= 0:
		return flagenv.Usagef("--older-than must be positive, such as 7d or 24h")
	case status != "SENT" && status != "FAILED" && status != "SKIPPED":
		return flagenv.Usagef("--status: %q is not SENT, FAILED or SKIPPED (PENDING events are never purged)", status)
	case batch < 1:
		return flagenv.Usagef("--batch must be at least 1")
	}
	since, until, err := f.times(time.Now())
	if err != nil {
		return err
	}
	pf := store.PurgeFilter{OlderThan: olderThan, Status: status, Topic: f.topic, EventType: f.eventType,
		Reason: strings.ToUpper(f.reason), Since: since, Until: until}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	defer func() { err = operatorDenied(ctx, st, err) }()
	var total int64
	for {
		n, err := st.Purge(ctx, pf, batch)
		if err != nil {
			return err
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	fmt.Fprintf(stdout, "purged %d %s events created more than %s ago\n", total, status, flagenv.FormatDuration(olderThan))
	return nil
}
