package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := newFlags("migrate", getenv)
	fs.Describe("", "", "Create or upgrade the outbox schema (outbox.events, outbox.deliveries, the SQL functions and\n"+
		"views, the publication), each version in its own transaction. Safe to run again.")
	var dbURL string
	var print bool
	var downTo int
	fs.SecretURL(&dbURL, "database-url", "", "PostgreSQL URL of the database that holds the outbox (required unless --print)")
	fs.Bool(&print, "print", false, "write the schema SQL to stdout instead of applying it (for teams that apply it themselves)")
	fs.Int(&downTo, "down-to", -1, "revert migrations above this version (0 removes the outbox tables); -1: none")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if print {
		return migrations.Print(stdout)
	}
	if dbURL == "" {
		return flagenv.Usagef("--database-url is required (or OUTBOX_DATABASE_URL)")
	}
	conn, err := dial(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if downTo >= 0 {
		reverted, err := migrations.Down(ctx, conn, downTo)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "reverted migrations %v; schema is at version %d\n", reverted, downTo)
		return nil
	}
	applied, err := migrations.Up(ctx, conn)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "outbox schema is up to date (version %d)\n", migrations.Latest())
	} else {
		fmt.Fprintf(stdout, "applied migrations %v; outbox schema is at version %d\n", applied, migrations.Latest())
	}
	warnWalLevel(ctx, conn, stderr)
	return nil
}

// warnWalLevel warns when the server cannot stream to the relay yet.
func warnWalLevel(ctx context.Context, conn *pgx.Conn, stderr io.Writer) {
	var level string
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err == nil && level != "logical" {
		fmt.Fprintf(stderr, "warning: wal_level is %q: outbox-relay run needs wal_level=logical (set it in postgresql.conf "+
			"and restart PostgreSQL), or runs only with --mode poll\n", level)
	}
}
