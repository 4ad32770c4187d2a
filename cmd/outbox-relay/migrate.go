package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := newFlags("migrate", getenv)
	fs.Describe("", "", "Create or upgrade the outbox schema (outbox.events, outbox.deliveries, the SQL functions and\n"+
		"views, the publication), each version in its own transaction. Safe to run again.")
	var dbURL string
	var print bool
	var downTo int
	fs.SecretURL(&dbURL, "database-url", "", "PostgreSQL URL of the database that holds the outbox (required unless --print, or --debezium-config with database.*)")
	fs.Bool(&print, "print", false, "write the schema SQL to stdout instead of applying it (for teams that apply it themselves)")
	fs.Int(&downTo, "down-to", -1, "revert migrations above this version (0 removes the outbox tables); -1: none")
	var tablesConfig, debeziumConfig, workerConfig, publication string
	fs.String(&tablesConfig, "tables-config", "", "also add the tables this --tables-config file maps to the publication (run's flag)")
	fs.String(&debeziumConfig, "debezium-config", "", "also add the tables of this Debezium connector configuration to the publication (run's flag)")
	fs.String(&workerConfig, "debezium-worker-config", "", "the Kafka Connect worker's properties file (run's flag)")
	fs.String(&publication, "publication", cdc.PublicationDefault, "the relay's publication, for mapped tables")
	roles, orderColumns := true, true
	fs.Bool(&roles, "roles", true, "create the group roles outbox_writer, outbox_operator and outbox_relay when missing, "+
		"and grant each what its job needs (and outbox_relay SELECT on mapped tables); false: manage roles yourself")
	fs.Bool(&orderColumns, "order-columns", true, "give mapped tables the order columns outbox_created_at and outbox_seq (no table rewrite), "+
		"which the backfill of a new slot, the gap sweep and --mode poll need; false: stream only")
	fs.Shared("tables-config", "debezium-config", "debezium-worker-config", "publication")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	files, err := readTables(tablesConfig, debeziumConfig, workerConfig, false)
	if err != nil {
		return err
	}
	mapped := files.tables
	if dbURL == "" {
		dbURL = files.dbURL // a Debezium file's database.* stand in, as for run
	}
	set := mappedSetup{roles: roles, orderColumns: orderColumns}
	if print {
		return printSchema(stdout, publication, mapped, set)
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
	if err := migrations.Indexes(ctx, conn); err != nil {
		return err
	}
	if roles {
		if err := migrations.Roles(ctx, conn); err != nil {
			return err
		}
	}
	if err := setUpMapped(ctx, conn, stdout, publication, mapped, set); err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "outbox schema is up to date (version %d)\n", migrations.Latest())
	} else {
		fmt.Fprintf(stdout, "applied migrations %v; outbox schema is at version %d\n", applied, migrations.Latest())
	}
	if roles {
		fmt.Fprintln(stdout, "roles outbox_writer, outbox_operator and outbox_relay have their grants")
	}
	warnWalLevel(ctx, conn, stderr)
	return nil
}

// printSchema writes what migrate would apply: the migrations, the roles
// (as set) and what the mapped tables need.
func printSchema(w io.Writer, publication string, mapped []*mapping.Table, set mappedSetup) error {
	if err := migrations.Print(w); err != nil {
		return err
	}
	if err := migrations.PrintIndexes(w); err != nil {
		return err
	}
	if set.roles {
		if err := migrations.PrintRoles(w); err != nil {
			return err
		}
	}
	return printMapped(w, publication, mapped, set)
}

// setUpMapped adds the mapped tables to publication and, as set, grants
// outbox_relay SELECT on them and gives them their order columns.
func setUpMapped(ctx context.Context, conn *pgx.Conn, stdout io.Writer, publication string, mapped []*mapping.Table, set mappedSetup) error {
	for _, t := range mapped {
		if _, err := conn.Exec(ctx, t.PublicationSQL(publication)); err != nil {
			return fmt.Errorf("%w: adding %s to publication %s: %w", cdc.ErrSetup, t.QualifiedName(), publication, pgdial.Explain(err))
		}
		fmt.Fprintf(stdout, "mapped table %s is in publication %s\n", t.QualifiedName(), publication)
		if set.roles {
			if _, err := conn.Exec(ctx, t.GrantSQL()); err != nil {
				return fmt.Errorf("%w: %s: %w", cdc.ErrSetup, t.GrantSQL(), pgdial.Explain(err))
			}
		}
		if set.orderColumns {
			if err := addOrderColumns(ctx, conn, t); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "mapped table %s has its order columns %s, %s\n", t.QualifiedName(), mapping.OrderCreatedAt, mapping.OrderSeq)
		}
	}
	return nil
}

// mappedSetup says what migrate does to mapped tables besides adding them
// to the publication.
type mappedSetup struct {
	roles        bool // grant outbox_relay SELECT
	orderColumns bool // add the order columns
}

// printMapped prints what a mapped table needs: its place in the
// publication and, as set, its grant and its order columns.
func printMapped(w io.Writer, publication string, tables []*mapping.Table, set mappedSetup) error {
	if len(tables) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n-- Mapped tables: the relay streams them through publication %s.\n", publication)
	if err == nil && set.orderColumns {
		_, err = fmt.Fprintf(w, "-- Their order columns, for the backfill of a new slot, the gap sweep and --mode poll:\n"+
			"-- added without a table rewrite; the index is built CONCURRENTLY (run it outside a transaction).\n"+
			"-- Nothing else is added to them (no trigger) and the relay never writes to them.\n")
	}
	for _, t := range tables {
		if err == nil {
			_, err = fmt.Fprintf(w, "%s\n", t.PublicationSQL(publication))
		}
		if set.roles && err == nil {
			_, err = fmt.Fprintf(w, "%s\n", t.GrantSQL())
		}
		if set.orderColumns && err == nil {
			_, err = fmt.Fprintf(w, "%s\n", strings.Join(t.OrderSQL(), "\n"))
		}
	}
	return err
}

// addOrderColumns gives t its order columns (mapping.OrderSQL), each
// statement on its own, waiting at most orderLockTimeout for the table's
// lock: an ALTER TABLE queued behind a long transaction would block every
// writer of the table meanwhile.
func addOrderColumns(ctx context.Context, conn *pgx.Conn, t *mapping.Table) error {
	if _, err := conn.Exec(ctx, "SET lock_timeout = "+orderLockTimeout); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET lock_timeout") //nolint:errcheck // the connection ends with the command
	for _, stmt := range t.OrderSQL() {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%w: giving %s its order columns: %s: %w (lock_timeout %s: if a long transaction holds the "+
				"table, run migrate again later; --order-columns=false skips this)", cdc.ErrSetup, t.QualifiedName(), stmt,
				pgdial.Explain(err), orderLockTimeout)
		}
	}
	return nil
}

// orderLockTimeout bounds each wait for a mapped table's lock.
const orderLockTimeout = "'5s'"

// warnWalLevel warns when the server cannot stream to the relay yet.
func warnWalLevel(ctx context.Context, conn *pgx.Conn, stderr io.Writer) {
	var level string
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err == nil && level != "logical" {
		fmt.Fprintf(stderr, "warning: wal_level is %q: outbox-relay run needs wal_level=logical (set it in postgresql.conf "+
			"and restart PostgreSQL), or runs only with --mode poll\n", level)
	}
}
