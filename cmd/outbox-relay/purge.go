package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

func purgeCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("purge", getenv)
	fs.SetOutput(stderr)
	var dbURL, status, topic string
	var olderThan time.Duration
	var batch int
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	fs.Duration(&olderThan, "older-than", 0, "delete events created longer ago than this, such as 24h (required)")
	fs.String(&status, "status", "SENT", "SENT, FAILED or SKIPPED: the delivery status of the events to delete (PENDING ones never are)")
	fs.String(&topic, "topic", "", "only this topic")
	fs.Int(&batch, "batch", 1000, "events per statement (each statement is its own short transaction)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	status = strings.ToUpper(status)
	switch {
	case olderThan <= 0:
		return errors.New("--older-than is required and must be positive, such as 24h")
	case status != "SENT" && status != "FAILED" && status != "SKIPPED":
		return fmt.Errorf("--status: %q is not SENT, FAILED or SKIPPED (PENDING events are never purged)", status)
	case batch < 1:
		return errors.New("--batch must be at least 1")
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	var total int64
	for {
		n, err := st.Purge(ctx, olderThan, status, batch, topic)
		if err != nil {
			return err
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	fmt.Fprintf(stdout, "purged %d %s events created more than %s ago\n", total, status, olderThan)
	return nil
}
