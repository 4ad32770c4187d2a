package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

func resendCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("resend", getenv)
	fs.Describe("ID...", "event ids (UUIDs) of the events to resend; or none, with --failed",
		"Resend events: due now, their attempts reset, whatever their status. With --failed instead of ids,\n"+
			"every FAILED event matching the filters.")
	var dbURL, from, to string
	var t targets
	databaseFlag(fs, &dbURL)
	t.register(fs, "resend")
	fs.String(&from, "from", "", "deprecated (use --since, which bounds when the events failed): with --failed, events created at or after this")
	fs.String(&to, "to", "", "deprecated (use --until): with --failed, events created before this")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	now := time.Now()
	filter, err := t.check(fs, now)
	if err != nil {
		return err
	}
	if from != "" || to != "" {
		fmt.Fprintln(stderr, "warning: --from and --to bound when the events were created and are deprecated; "+
			"--since and --until bound when they failed, as in `outbox-relay failed`")
		if filter.CreatedFrom, err = parseWhen("--from", from, now); err != nil {
			return err
		}
		if filter.CreatedTo, err = parseWhen("--to", to, now); err != nil {
			return err
		}
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	defer func() { err = operatorDenied(ctx, st, err) }()
	return t.apply(stdout, stderr, "resent", func() (int64, error) { return st.ResendFailed(ctx, filter) },
		func(id string) (string, error) {
			ok, err := st.Resend(ctx, id)
			if !ok {
				return "no such event", err
			}
			return "", err
		})
}

// targets is what resend and skip act on: event ids, or with --failed
// every FAILED event matching the filters.
type targets struct {
	failed bool
	filter filterFlags
	ids    []string
}

func (t *targets) register(fs *flagenv.Set, verb string) {
	fs.Bool(&t.failed, "failed", false, verb+" every FAILED event matching the filters (instead of event ids)")
	t.filter.register(fs, "failed")
	t.filter.search(fs)
}

// check reads the ids after the flags and returns the filter.
func (t *targets) check(fs *flagenv.Set, now time.Time) (store.FailedFilter, error) {
	t.ids = fs.Args()
	switch {
	case t.failed && len(t.ids) > 0:
		return store.FailedFilter{}, flagenv.Usagef("give event ids or --failed with filters, not both")
	case !t.failed && len(t.ids) == 0:
		return store.FailedFilter{}, flagenv.Usagef("give event ids (%s ID...) or --failed with filters", fs.Name())
	case !t.failed && t.filter.set():
		return store.FailedFilter{}, flagenv.Usagef("the filters (--topic, --event-type, --reason, --since, --until, --key, --error-contains) go with --failed, not with event ids")
	}
	for _, id := range t.ids {
		if !uuidText.MatchString(id) {
			return store.FailedFilter{}, flagenv.Usagef("%q is not an event id (a UUID)", id)
		}
	}
	return t.filter.failed(now)
}

// apply acts on t's events: every FAILED one matching the filters through
// all, or each id through one, which says why it refused an event ("" when
// it did not); verb says what was done.
func (t *targets) apply(stdout, stderr io.Writer, verb string, all func() (int64, error),
	one func(id string) (refused string, err error)) error {
	if t.failed {
		n, err := all()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %d failed events\n", verb, n)
		return nil
	}
	refused := 0
	for _, id := range t.ids {
		why, err := one(id)
		if err != nil {
			return err
		}
		if why != "" {
			refused++
			fmt.Fprintf(stderr, "%s: %s\n", id, termsafe.String(why))
		}
	}
	fmt.Fprintf(stdout, "%s %d events\n", verb, len(t.ids)-refused)
	if refused > 0 {
		return fmt.Errorf("%d of %d events were not %s", refused, len(t.ids), verb)
	}
	return nil
}

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
