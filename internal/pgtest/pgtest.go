// Package pgtest gives each test its own migrated database on the real
// PostgreSQL named by TEST_DATABASE_URL (scripts/test.sh starts one).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/migrations"
)

// AdminURL returns TEST_DATABASE_URL or fails the test with how to get one.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("TEST_DATABASE_URL is not set: run scripts/test.sh, which starts a throwaway PostgreSQL (wal_level=logical)")
	}
	return u
}

// NewDB creates an empty database, dropped (with its replication slots) when
// the test ends, and returns its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	return newDB(t, "")
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// migratedTemplate creates, once per test process, a database with the
// outbox schema for Migrated to clone: copying files is faster than running
// the migrations for every test.
func migratedTemplate(t testing.TB) string {
	templateOnce.Do(func() {
		ctx := context.Background()
		name := fmt.Sprintf("outbox_template_%d", os.Getpid())
		admin := AdminURL(t)
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			templateErr = err
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			templateErr = err
			return
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			templateErr = err
			return
		}
		u, _ := url.Parse(admin)
		u.Path = "/" + name
		tc, err := pgx.Connect(ctx, u.String())
		if err != nil {
			templateErr = err
			return
		}
		if _, templateErr = migrations.Up(ctx, tc); templateErr == nil {
			templateErr = migrations.Indexes(ctx, tc)
		}
		if templateErr == nil {
			templateErr = relayRole(ctx, tc)
		}
		tc.Close(ctx)
		templateName = name
	})
	if templateErr != nil {
		t.Fatalf("creating migrated template database: %v", templateErr)
	}
	return templateName
}

// The login roles tests run the relay and the operator commands as, with
// least privilege: RelayRole has REPLICATION and outbox_relay, OperatorRole
// outbox_operator, WriterRole outbox_writer (an application, or a hostile
// writer of outbox.events); none is superuser or owns the outbox.
const (
	RelayRole    = "outbox_test_relay"
	OperatorRole = "outbox_test_operator"
	WriterRole   = "outbox_test_intruder"
)

// relayRole gives db's cluster the outbox roles (migrations.Roles),
// RelayRole and OperatorRole, unless it has them.
func relayRole(ctx context.Context, db *pgx.Conn) error {
	if err := migrations.Roles(ctx, db); err != nil {
		return err
	}
	return loginRoles(ctx, db)
}

// LoginRoles gives dbURL's cluster RelayRole, OperatorRole and WriterRole, unless it
// has them, for a test that migrated dbURL's database itself (with the
// binary's migrate, which creates the outbox roles they are members of).
func LoginRoles(t testing.TB, dbURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := loginRoles(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// loginRoles creates RelayRole, OperatorRole and WriterRole unless they exist.
func loginRoles(ctx context.Context, db *pgx.Conn) error {
	for role, attrs := range map[string]string{RelayRole: "LOGIN REPLICATION IN ROLE outbox_relay",
		OperatorRole: "LOGIN IN ROLE outbox_operator", WriterRole: "LOGIN IN ROLE outbox_writer"} {
		_, err := db.Exec(ctx, `DO $$ BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '`+role+`') THEN
				CREATE ROLE `+role+` `+attrs+`;
			END IF;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; -- another test process made it
		END $$`)
		if err != nil {
			return fmt.Errorf("creating role %s: %w", role, err)
		}
	}
	return nil
}

// RelayURL is dbURL with RelayRole as its user: the relay's least
// privilege.
func RelayURL(dbURL string) string { return asUser(dbURL, RelayRole) }

// OperatorURL is dbURL with OperatorRole as its user.
func OperatorURL(dbURL string) string { return asUser(dbURL, OperatorRole) }

// WriterURL is dbURL with WriterRole as its user.
func WriterURL(dbURL string) string { return asUser(dbURL, WriterRole) }

func asUser(dbURL, user string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	u.User = url.User(user)
	return u.String()
}

func newDB(t testing.TB, template string) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connecting to TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "outbox_test_" + hex.EncodeToString(b[:])
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() { dropDB(t, admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parsing TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDB(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Logf("dropping %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	// A relay that just stopped may still hold its slot for a moment.
	for {
		_, err = conn.Exec(ctx, `
			SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL;
		`, name)
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		}
		if err == nil {
			_, err = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Logf("dropping %s: %v", name, err)
	}
}

// Migrated creates a database with the outbox schema applied and returns its
// URL and a pool on it.
func Migrated(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := newDB(t, migratedTemplate(t))
	return dbURL, Pool(t, dbURL)
}

// Migrate applies the outbox schema to dbURL's database, of a cluster the
// test started (Cluster), with the outbox roles and RelayRole.
func Migrate(t testing.TB, dbURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Up(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Indexes(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := relayRole(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// Pool opens a pool closed when the test ends.
func Pool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Eventually polls cond, from every 10ms backing off to every 250ms, until
// it returns true or timeout passes, then fails with what the last call said.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(wait)
		wait = min(wait*2, 250*time.Millisecond)
	}
}

// Count runs a count query.
func Count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Exec runs sql on pool, failing t if it fails.
func Exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// InsertEvents commits n events on topic "t" in one statement and returns
// their ids in insertion order.
func InsertEvents(t testing.TB, pool *pgxpool.Pool, n int) [][16]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), `INSERT INTO outbox.events (topic, payload)
		SELECT 't', jsonb_build_object('n', n) FROM generate_series(1, $1) AS n ORDER BY n RETURNING id`, n)
	if err != nil {
		t.Fatalf("inserting %d events: %v", n, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[16]byte])
	if err != nil || len(ids) != n {
		t.Fatalf("inserted %d of %d events: %v", len(ids), n, err)
	}
	return ids
}
