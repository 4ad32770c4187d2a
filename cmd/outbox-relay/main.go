// Command outbox-relay streams outbox.events inserts from a PostgreSQL
// logical replication slot to Kafka and records each delivery in
// outbox.deliveries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/outbox-relay/outbox-relay/relay"
)

const usage = `outbox-relay: PostgreSQL transactional outbox to Kafka

Usage:
  outbox-relay run      [flags]   stream outbox.events to Kafka
  outbox-relay migrate  [flags]   create or upgrade the outbox schema (--print writes the SQL)
  outbox-relay failed   [flags]   list or count FAILED events (filters, --after ID to page)
  outbox-relay resend   [flags] ID...   resend events; or --failed [filters] for every matching FAILED one
  outbox-relay held     [flags]   keys held behind a FAILED event or a retry, with how many wait
  outbox-relay skip     [flags] ID...   give up on FAILED events (SKIPPED): never delivered, their keys released
  outbox-relay purge    [flags]   delete SENT (or FAILED, SKIPPED) events older than --older-than
  outbox-relay status   [flags]   slots, counts by topic and status, FAILED by reason; a running relay's role
  outbox-relay version

Every flag can also be set by an environment variable: --database-url is
OUTBOX_DATABASE_URL. Run 'outbox-relay <command> -h' for a command's flags.

Exit codes: 0 stopped on a signal, 1 error, 2 setup problem to fix (wal_level,
schema, slot, publication; the message says what to do), 130 second signal.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(ctx, args[1:], stderr, getenv)
	case "migrate":
		err = migrateCmd(ctx, args[1:], stdout, stderr, getenv)
	case "failed":
		err = failedCmd(ctx, args[1:], stdout, stderr, getenv)
	case "resend":
		err = resendCmd(ctx, args[1:], stdout, stderr, getenv)
	case "held":
		err = heldCmd(ctx, args[1:], stdout, stderr, getenv)
	case "skip":
		err = skipCmd(ctx, args[1:], stdout, stderr, getenv)
	case "purge":
		err = purgeCmd(ctx, args[1:], stdout, stderr, getenv)
	case "status":
		err = statusCmd(ctx, args[1:], stdout, stderr, getenv)
	case "version", "--version":
		fmt.Fprintln(stdout, "outbox-relay", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "outbox-relay: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-relay %s: %v\n", args[0], err)
		if relay.IsSetup(err) {
			return 2 // an operator must fix the database or its settings
		}
		return 1
	}
	return 0
}
