// Command outbox-relay streams outbox.events inserts from a PostgreSQL
// logical replication slot to Kafka and records each delivery in
// outbox.deliveries.
package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"

	"github.com/outbox-relay/outbox-relay/relay"
)

const usage = `outbox-relay: PostgreSQL transactional outbox to Kafka

Usage:
  outbox-relay run      [flags]         stream outbox.events to Kafka
  outbox-relay migrate  [flags]         create or upgrade the outbox schema (--print writes the SQL)
  outbox-relay failed   [flags]         list or count FAILED events (filters, --after ID to page)
  outbox-relay resend   [flags] ID...   resend events; or --failed [filters] for every matching FAILED one
  outbox-relay held     [flags]         keys held behind a FAILED event or a retry, with how many wait
  outbox-relay skip     [flags] ID...   give up on FAILED events (SKIPPED); or --failed [filters]
  outbox-relay purge    [flags]         delete SENT (or FAILED, SKIPPED) events older than --older-than
  outbox-relay status   [flags]         slots, counts by topic and status, FAILED by reason; a running relay's role
  outbox-relay console  [flags]         the operator console: counts, FAILED events, held keys, resend and skip in a browser
  outbox-relay version

Run 'outbox-relay <command> --help' for a command's arguments and flags.
Every flag can also be set by an environment variable: run's --kafka-brokers
is OUTBOX_KAFKA_BROKERS; another command's flag is OUTBOX_<COMMAND>_<FLAG>
(purge --topic is OUTBOX_PURGE_TOPIC), but --database-url is
OUTBOX_DATABASE_URL everywhere. Durations take ms, s, m, h and d (7d).

Exit codes: 0 done (run: stopped on a signal); 1 error; 2 setup problem to fix
(wal_level, schema, slot, publication, credentials, Kafka TLS or SASL
settings; the message says what to do); 64 usage error (unknown command or
flag, a bad or missing value); 130 second signal.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// command runs one subcommand.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error

var commands = map[string]command{
	"run": runCmd, "migrate": migrateCmd, "failed": failedCmd, "resend": resendCmd, "held": heldCmd,
	"skip": skipCmd, "purge": purgeCmd, "status": statusCmd, "console": consoleCmd,
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flagenv.ExitUsage
	}
	name := args[0]
	switch name {
	case "version", "--version":
		fmt.Fprintln(stdout, "outbox-relay", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[name]
	if name == "docs" { // hidden: go generate's, not an operator's
		cmd, ok = docsCmd, true
	}
	if !ok {
		msg := fmt.Sprintf("outbox-relay: unknown command %q", name)
		if close := flagenv.Closest(name, slices.Sorted(maps.Keys(commands))); close != "" {
			msg += fmt.Sprintf("; did you mean %q?", close)
		}
		fmt.Fprintf(stderr, "%s\nRun 'outbox-relay --help' for the commands.\n", msg)
		return flagenv.ExitUsage
	}
	// An operator must fix a setup problem: the database, the broker or
	// their settings.
	return flagenv.Report(stderr, "outbox-relay", name, cmd(ctx, args[1:], stdout, stderr, getenv), relay.IsSetup)
}
