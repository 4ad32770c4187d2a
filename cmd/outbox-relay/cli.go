package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/relay"
)

// newFlags returns the flag set of an operator command: its flags read
// OUTBOX_<COMMAND>_<FLAG>, --database-url reads OUTBOX_DATABASE_URL.
func newFlags(name string, getenv func(string) string) *flagenv.Set {
	fs := flagenv.NewCommand("outbox-relay "+name, getenv)
	fs.Shared("database-url")
	return fs
}

// databaseFlag defines --database-url, required.
func databaseFlag(fs *flagenv.Set, p *string) {
	fs.SecretURL(p, "database-url", "", "PostgreSQL URL of the database that holds the outbox")
	fs.Required("database-url")
}

// parse parses args; for --help it writes the command's help to stdout (or
// hands the flag set to the docs command's collector) and returns
// flag.ErrHelp. Warnings (an old variable name) go to stderr.
func parse(fs *flagenv.Set, args []string, stdout, stderr io.Writer) error {
	err := fs.Parse(args)
	for _, w := range fs.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if errors.Is(err, flag.ErrHelp) {
		if c, ok := stdout.(interface{ collect(*flagenv.Set) }); ok {
			c.collect(fs) // the docs command reads the flags themselves
		} else {
			fs.Help(stdout)
		}
	}
	return err
}

// filterFlags are the filters the failed, resend, skip and purge commands
// share.
type filterFlags struct {
	topic, eventType, reason, since, until string
	// key and errorContains are the FAILED search's (failed, resend and
	// skip; not purge): search defines them.
	key, errorContains string
}

// search defines the filters of a search of FAILED events by key and by a
// text of the last error.
func (f *filterFlags) search(fs *flagenv.Set) {
	fs.String(&f.key, "key", "", "only events of this key")
	fs.String(&f.errorContains, "error-contains", "", "only events whose last_error contains this text (case-sensitive; "+
		"read from each FAILED row matching the other filters: narrow them on a big table)")
}

// register defines the filters; when is what --since and --until bound.
func (f *filterFlags) register(fs *flagenv.Set, when string) {
	fs.String(&f.topic, "topic", "", "only events of this topic")
	fs.String(&f.eventType, "event-type", "", "only events of this event_type")
	fs.String(&f.reason, "reason", "", "only events with this failure_reason (INVALID_TOPIC, MESSAGE_TOO_LARGE, RETRIES_EXHAUSTED, ...)")
	fs.String(&f.since, "since", "", "only events "+when+" at or after this: an RFC 3339 time, or a duration ago such as 2h or 7d")
	fs.String(&f.until, "until", "", "only events "+when+" before this: an RFC 3339 time, or a duration ago such as 30m or 1d")
}

// set reports whether any filter is given.
func (f *filterFlags) set() bool {
	return f.topic != "" || f.eventType != "" || f.reason != "" || f.since != "" || f.until != "" || f.key != "" ||
		f.errorContains != ""
}

// failed returns the store's filter of FAILED events.
func (f *filterFlags) failed(now time.Time) (store.FailedFilter, error) {
	since, until, err := f.times(now)
	if err == nil && since != nil && until != nil && until.Before(*since) {
		err = flagenv.Usagef("--until %q is before --since %q", f.until, f.since)
	}
	return store.FailedFilter{Topic: f.topic, EventType: f.eventType, Reason: strings.ToUpper(f.reason),
		Since: since, Until: until, Key: f.key, ErrorContains: f.errorContains}, err
}

func (f *filterFlags) times(now time.Time) (since, until *time.Time, err error) {
	if since, err = parseWhen("--since", f.since, now); err != nil {
		return nil, nil, err
	}
	until, err = parseWhen("--until", f.until, now)
	return since, until, err
}

// parseWhen reads a time flag: an RFC 3339 time, or a duration ago.
func parseWhen(flag, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return &t, nil
	}
	if d, err := flagenv.ParseDuration(v); err == nil {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, flagenv.Usagef("%s: %q is neither an RFC 3339 time nor a duration ago such as 2h or 7d", flag, v)
}

// connect opens a store on one connection to a database whose outbox
// schema is this release's; close it with the returned func.
func connect(ctx context.Context, dbURL string) (*store.Store, func(), error) {
	conn, err := dial(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	st := store.New(conn)
	closeDB := func() { conn.Close(context.WithoutCancel(ctx)) }
	if err := checkSchema(ctx, st); err != nil {
		closeDB()
		return nil, nil, err
	}
	return st, closeDB, nil
}

// dial connects to dbURL through pgdial, as the relay does (keepalives,
// search_path).
func dial(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	if err := checkDatabaseURL("--database-url", dbURL); err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(dbURL)
	if err != nil { // checked above; pgx's words would quote the URL
		return nil, errors.New("connecting to postgres: --database-url does not parse")
	}
	pgdial.Apply(&cc.Config, pgdial.TimeoutDefault)
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", pgdial.Explain(err))
	}
	return conn, nil
}

// checkDatabaseURL refuses, as a usage error (exit 64) that shows none of
// it, a database URL that does not parse or would be misread
// (pgdial.CheckURL); flag names it.
func checkDatabaseURL(flag, dbURL string) error {
	if err := pgdial.CheckURL(dbURL); err != nil {
		return flagenv.Usagef("%s: %v", flag, err)
	}
	return nil
}

// checkSchema fails, saying to run migrate, unless the database's outbox
// schema is this release's.
func checkSchema(ctx context.Context, st *store.Store) error {
	v, err := st.SchemaVersion(ctx)
	if err != nil && !errors.Is(err, store.ErrNoSchema) {
		return operatorDenied(ctx, st, err)
	}
	return relay.CheckSchemaVersion(v)
}

// operatorDenied turns PostgreSQL's refusal of an operator command's
// statement for want of a privilege (SQLSTATE 42501) into a setup error
// that names the grant to run (and what the role lacks of
// outbox_operator's rights), and returns other errors as they are.
func operatorDenied(ctx context.Context, st *store.Store, err error) error {
	if !pgdial.IsDenied(err) {
		return err
	}
	rights, rerr := st.MissingRights(ctx, relay.GroupOperator)
	if rerr != nil {
		return err
	}
	return relay.RightsError(rights, relay.GroupOperator, err)
}
