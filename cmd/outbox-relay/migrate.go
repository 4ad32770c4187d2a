package main

import (
	"context"
	"fmt"
	"io"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flagenv.New("migrate", getenv)
	fs.SetOutput(stderr)
	var dbURL string
	var print bool
	var downTo int
	fs.String(&dbURL, "database-url", "", "PostgreSQL URL")
	fs.BoolVar(&print, "print", false, "write the schema SQL to stdout instead of applying it")
	fs.IntVar(&downTo, "down-to", -1, "revert migrations above this version (0 removes the outbox tables)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if print {
		return migrations.Print(stdout)
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
	return nil
}
