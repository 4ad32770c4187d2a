// Package migrations owns the outbox schema: numbered SQL files embedded in
// the binary, applied in order, each in its own transaction, recorded in
// outbox.schema_migrations and serialised by an advisory lock so that two
// processes migrating at once is safe.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered schema change with its reverse.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// ErrForeignSchema: the schema outbox exists and another role owns it or may
// create objects in it, so that role could drop or replace what migrate
// builds there. Migrate refuses to build in it.
var ErrForeignSchema = errors.New("the outbox schema is not the migrating role's")

// lockKey is the advisory lock held by every migration transaction.
const lockKey = "outbox-relay/migrations"

// lockSQL takes lockKey for the transaction. Built-ins are named with
// their schema and given their exact argument types (hashtext's integer
// cast to pg_advisory_xact_lock's bigint): a function of the same name
// whose argument types fit better, in a schema on the search_path, would
// otherwise run in their place with the rights of whoever migrates.
const lockSQL = `SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text)::bigint)`

// searchPathSQL starts the printed schema: the search_path migrate's own
// connection has (pgdial.SearchPath), so that applying it with another
// tool runs no function a role could have put on that tool's path.
const searchPathSQL = "SET search_path = pg_catalog, pg_temp;"

// bootstrapSQL creates what the version bookkeeping itself needs.
const bootstrapSQL = `CREATE SCHEMA IF NOT EXISTS outbox;
CREATE TABLE IF NOT EXISTS outbox.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);`

var fileName = regexp.MustCompile(`^(\d+)_(\w+)\.(up|down)\.sql$`)

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		body, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", e.Name(), err)
		}
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mig
		}
		if m[3] == "up" {
			mig.Up = string(body)
		} else {
			mig.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %d_%s needs both an .up.sql and a .down.sql file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Latest is the version the embedded migrations lead to.
func Latest() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// DB is what the migrator needs: a *pgx.Conn or a *pgxpool.Pool.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Up applies every migration not applied yet and returns the versions it applied.
func Up(ctx context.Context, db DB) ([]int, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range all {
		did, err := step(ctx, db, m, true)
		if err != nil {
			return applied, err
		}
		if did {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// Down reverts applied migrations above target, newest first, and returns the
// versions it reverted. Down(ctx, db, 0) removes the whole outbox schema's tables.
func Down(ctx context.Context, db DB, target int) ([]int, error) {
	if target < 0 {
		return nil, errors.New("target version must be 0 or more")
	}
	all, err := All()
	if err != nil {
		return nil, err
	}
	var reverted []int
	for i := len(all) - 1; i >= 0 && all[i].Version > target; i-- {
		did, err := step(ctx, db, all[i], false)
		if err != nil {
			return reverted, err
		}
		if did {
			reverted = append(reverted, all[i].Version)
		}
	}
	return reverted, nil
}

// Current returns the highest applied version, 0 when none is.
func Current(ctx context.Context, db DB) (int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('outbox.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("looking for outbox.schema_migrations: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM outbox.schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

// step applies (up) or reverts (down) one migration in its own transaction,
// under the advisory lock, unless the version table says it is already done.
func step(ctx context.Context, db DB, m Migration, up bool) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning migration %d: %w", m.Version, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := tx.Exec(ctx, lockSQL, lockKey); err != nil {
		return false, fmt.Errorf("taking migration lock: %w", err)
	}
	// Before the bootstrap, for its message; after it, for a schema created
	// meanwhile by another role.
	if err := checkOwner(ctx, tx); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, bootstrapSQL); err != nil {
		return false, fmt.Errorf("creating outbox.schema_migrations: %w", err)
	}
	if err := checkOwner(ctx, tx); err != nil {
		return false, err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox.schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
		return false, fmt.Errorf("reading schema version: %w", err)
	}
	if done == up {
		return false, nil
	}
	body, record := m.Up, `INSERT INTO outbox.schema_migrations (version, name) VALUES ($1, $2)`
	if !up {
		body, record = m.Down, `DELETE FROM outbox.schema_migrations WHERE version = $1 AND name = $2`
	}
	if _, err := tx.Exec(ctx, body); err != nil {
		return false, fmt.Errorf("migration %d_%s (%s): %w", m.Version, m.Name, direction(up), err)
	}
	if _, err := tx.Exec(ctx, record, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("recording migration %d: %w", m.Version, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("committing migration %d: %w", m.Version, err)
	}
	return true, nil
}

// ownerSQL reads, when the schema outbox exists, its owner, whether the
// current role is it, and the other roles that may create in it.
const ownerSQL = `SELECT pg_catalog.pg_get_userbyid(n.nspowner)::text, n.nspowner = r.oid,
       coalesce((SELECT pg_catalog.string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                                   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)::text) END, ', ')
                 FROM pg_catalog.aclexplode(n.nspacl) a
                 WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner), '')
FROM pg_catalog.pg_namespace n, pg_catalog.pg_roles r
WHERE n.nspname = 'outbox' AND r.rolname = current_user`

// checkOwner returns ErrForeignSchema, naming the roles at fault, when the
// schema outbox exists and another role owns it or holds CREATE on it.
func checkOwner(ctx context.Context, tx pgx.Tx) error {
	var owner, creators string
	var mine bool
	err := tx.QueryRow(ctx, ownerSQL).Scan(&owner, &mine, &creators)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // created by the bootstrap, as this role
	case err != nil:
		return fmt.Errorf("reading the owner of schema outbox: %w", err)
	case !mine:
		return fmt.Errorf("%w: role %q owns it and could drop or replace every table migrate builds there; "+
			"run migrate as %q, or have %q run ALTER SCHEMA outbox OWNER TO the role that migrates", ErrForeignSchema, owner, owner, owner)
	case creators != "":
		return fmt.Errorf("%w: %s may create objects in it (CREATE on schema outbox), such as a function or view that "+
			"shadows the outbox's; run REVOKE CREATE ON SCHEMA outbox FROM %s", ErrForeignSchema, creators, creators)
	}
	return nil
}

func direction(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// Print writes every up migration as one SQL script, for teams that apply
// schema changes with their own tool. Each migration is its own transaction
// and records its version, so `outbox-relay migrate` later sees it as done.
func Print(w io.Writer) error {
	all, err := All()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "-- outbox-relay schema, versions 1 to %d.\n%s\n%s\n", Latest(), searchPathSQL, bootstrapSQL); err != nil {
		return err
	}
	for _, m := range all {
		_, err := fmt.Fprintf(w, "\n-- migration %d_%s\nBEGIN;\n%s\nINSERT INTO outbox.schema_migrations (version, name) VALUES (%d, '%s');\nCOMMIT;\n",
			m.Version, m.Name, m.Up, m.Version, m.Name)
		if err != nil {
			return err
		}
	}
	return nil
}

//go:embed roles.sql
var rolesSQL string

// Roles creates the group roles outbox_writer, outbox_operator and
// outbox_relay when they are missing and grants each what its job needs
// (roles.sql), in one transaction under the migration lock. Run it after
// Up; it is idempotent.
func Roles(ctx context.Context, db DB) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning the roles' grants: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := tx.Exec(ctx, lockSQL, lockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, rolesSQL); err != nil {
		return fmt.Errorf("creating the outbox roles and their grants (roles.sql; creating a role needs CREATEROLE, "+
			"or create outbox_writer, outbox_operator and outbox_relay beforehand; --roles=false skips this): %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the roles' grants: %w", err)
	}
	return nil
}

// PrintRoles writes roles.sql, for teams that manage roles themselves.
func PrintRoles(w io.Writer) error {
	_, err := fmt.Fprintf(w, "\n-- outbox roles and grants\nBEGIN;\n%s\nCOMMIT;\n", rolesSQL)
	return err
}

//go:embed indexes.sql
var indexesSQL string

// Execer is what Indexes needs: a *pgx.Conn or a *pgxpool.Pool, outside a
// transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// indexName reads an index statement's index.
var indexName = regexp.MustCompile(`(?i)CREATE INDEX CONCURRENTLY IF NOT EXISTS (\w+) ON`)

// OnlineIndexes are indexes.sql's statements, one per paragraph, comments
// left out.
func OnlineIndexes() []string {
	var out []string
	for _, para := range strings.Split(indexesSQL, "\n\n") {
		var lines []string
		for _, l := range strings.Split(para, "\n") {
			if !strings.HasPrefix(l, "--") && strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, "\n"))
		}
	}
	return out
}

// Indexes builds indexes.sql's indexes CONCURRENTLY, one at a time and
// outside a transaction, so that writers go on meanwhile. An index that a
// failed or cancelled build left invalid is dropped and built again. Run it
// after Up; it is idempotent: an index that exists and is valid is not
// built again. Each build waits for the transactions open when it starts.
func Indexes(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, `SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1::text)::bigint)`, lockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	defer db.Exec(context.WithoutCancel(ctx), `SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1::text)::bigint)`, lockKey) //nolint:errcheck // ends with the session
	for _, stmt := range OnlineIndexes() {
		m := indexName.FindStringSubmatch(stmt)
		if m == nil {
			return fmt.Errorf("indexes.sql: %q is not CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON", stmt)
		}
		var invalid bool
		err := db.QueryRow(ctx, `SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass('outbox.' || $1)`, m[1]).Scan(&invalid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("looking for index outbox.%s: %w", m[1], err)
		}
		if err == nil && !invalid {
			// Built: skipped here, not left to IF NOT EXISTS, which a
			// partitioned table never reaches (CONCURRENTLY is refused on
			// one first; scripts/partitions/convert.sql's tables).
			continue
		}
		if invalid {
			if _, err := db.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS outbox."+m[1]); err != nil {
				return fmt.Errorf("dropping the invalid index outbox.%s a failed build left: %w", m[1], err)
			}
		}
		if _, err := db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("building index outbox.%s (indexes.sql): %w", m[1], err)
		}
	}
	return nil
}

// PrintIndexes writes indexes.sql's statements, each to run on its own,
// outside a transaction.
func PrintIndexes(w io.Writer) error {
	_, err := fmt.Fprintf(w, "\n-- outbox indexes built CONCURRENTLY: run each on its own, outside a transaction\n%s\n",
		strings.Join(OnlineIndexes(), "\n"))
	return err
}
