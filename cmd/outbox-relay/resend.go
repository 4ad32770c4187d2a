package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func resendCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("resend", getenv)
	fs.SetOutput(stderr)
	var dbURL, topic, eventType, reason, from, to string
	var failed bool
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	fs.BoolVar(&failed, "failed", false, "resend every FAILED event matching the filters below")
	fs.StringVar(&topic, "topic", "", "with --failed: only this topic")
	fs.StringVar(&eventType, "event-type", "", "with --failed: only this event_type")
	fs.StringVar(&reason, "reason", "", "with --failed: only this failure_reason")
	fs.StringVar(&from, "from", "", "with --failed: events created at or after (RFC 3339, or a duration ago such as 2h)")
	fs.StringVar(&to, "to", "", "with --failed: events created before (RFC 3339, or a duration ago)")
	// Event ids come after the flags.
	if err := fs.FlagSet.Parse(args); err != nil {
		return err
	}
	ids := fs.Args()
	if failed == (len(ids) > 0) {
		return errors.New("give event ids (outbox-relay resend ID...) or --failed with filters, not both or neither")
	}
	fromT, toT, err := parseRange(time.Now(), "--from", from, "--to", to)
	if err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	if failed {
		n, err := st.ResendFailed(ctx, store.FailedFilter{Topic: topic, EventType: eventType,
			Reason: strings.ToUpper(reason), Since: fromT, Until: toT})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resent %d failed events\n", n)
		return nil
	}
	missing := 0
	for _, id := range ids {
		ok, err := st.Resend(ctx, id)
		if err != nil {
			return err
		}
		if !ok {
			missing++
			fmt.Fprintf(stderr, "no event %s\n", id)
		}
	}
	fmt.Fprintf(stdout, "resent %d events\n", len(ids)-missing)
	if missing > 0 {
		return fmt.Errorf("%d of %d events do not exist", missing, len(ids))
	}
	return nil
}
