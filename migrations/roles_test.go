package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/migrations"
)

// loginAs creates a login role that is a member of group (dropped when the
// test ends) and returns a connection to dbURL as it.
func loginAs(t *testing.T, dbURL, group string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	admin := pgtest.Pool(t, dbURL)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := group + "_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE "+group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP OWNED BY "+name+"; DROP ROLE "+name) })
	u, _ := url.Parse(dbURL)
	u.User = url.User(name)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// may runs sql as conn's role and reports whether PostgreSQL allowed it:
// refused is SQLSTATE 42501 (insufficient privilege, or not the owner).
func may(t *testing.T, conn *pgx.Conn, sql string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing is kept
	_, err = tx.Exec(ctx, sql)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return false
	}
	t.Fatalf("%s: %v (want success or insufficient privilege)", sql, err)
	return false
}

func TestRoles_EachRoleCanDoItsJobAndNothingElse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, pool := pgtest.Migrated(t) // migrated with the roles (pgtest runs migrations.Roles)
	// What earlier versions granted: Roles takes it back.
	if _, err := pool.Exec(ctx, `GRANT INSERT, UPDATE, DELETE ON outbox.deliveries TO outbox_operator;
		GRANT DELETE ON outbox.events, outbox.mapped_events TO outbox_operator; GRANT INSERT ON outbox.events TO outbox_writer`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Roles(ctx, pool); err != nil {
		t.Fatalf("Roles again: %v", err) // idempotent
	}
	var event string
	if err := pool.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{}') RETURNING id::text`).
		Scan(&event); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error)
		VALUES ($1, 'FAILED', 1, 'REJECTED', 'no')`, event); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"a": 1}') RETURNING id`
	resend := `SELECT outbox.resend('` + event + `')`
	logAction := `SELECT outbox.log_console_action('admin', '127.0.0.1:1', 'skip', '{}', 0, NULL)`
	cases := []struct {
		group   string
		allowed []string
		refused []string
	}{
		{"outbox_writer",
			[]string{insert, `INSERT INTO outbox.events (id, topic, key, payload, headers, event_type, max_attempts)
				VALUES (gen_random_uuid(), 'orders', 'k', '{}', '{"h": "v"}', 'created', 3) RETURNING id`},
			[]string{`INSERT INTO outbox.events (topic, payload, seq) VALUES ('orders', '{}', 1)`, // jumps the queue
				`INSERT INTO outbox.events (topic, payload, created_at) VALUES ('orders', '{}', now() - interval '30 days')`, // retention's prey
				`UPDATE outbox.deliveries SET status = 'SENT'`, `DELETE FROM outbox.deliveries`,
				`SELECT * FROM outbox.deliveries`, resend, `SELECT outbox.skip('` + event + `')`,
				`SELECT payload FROM outbox.events`, `DELETE FROM outbox.events`, logAction}},
		{"outbox_operator",
			[]string{`SELECT * FROM outbox.failed_events`, `SELECT * FROM outbox.delivery_stats`, `SELECT * FROM outbox.held_keys`,
				resend, `SELECT outbox.skip('` + event + `')`, `SELECT outbox.resend_failed()`,
				`SELECT * FROM outbox.resend_if_failed('` + event + `')`, `SELECT outbox.skip_failed()`,
				`SELECT outbox.purge(interval '1 day')`, logAction, `SELECT * FROM outbox.console_actions`},
			// Status rows and events change only through the functions:
			// purge never deletes a PENDING event, nothing else may.
			[]string{insert, `ALTER TABLE outbox.events ADD COLUMN x int`, `CREATE TABLE outbox.x (a int)`,
				`TRUNCATE outbox.deliveries`, `UPDATE outbox.deliveries SET status = 'SENT'`,
				`INSERT INTO outbox.deliveries (event_id, status) VALUES ('` + event + `', 'SENT') ON CONFLICT (event_id) DO UPDATE SET status = 'SENT'`,
				`DELETE FROM outbox.deliveries`, `DELETE FROM outbox.events`, `DELETE FROM outbox.mapped_events`,
				`SELECT 1 FROM outbox.deliveries FOR UPDATE`, `UPDATE outbox.console_actions SET rows_changed = 0`,
				`DELETE FROM outbox.console_actions`, `INSERT INTO outbox.console_actions (token_role, remote_addr, action, filter, rows_changed, db_user)
				VALUES ('admin', 'x', 'skip', '{}', 0, 'x')`}},
		{"outbox_relay",
			[]string{`SELECT * FROM outbox.events`, `SELECT * FROM outbox.relayed_events`,
				`UPDATE outbox.deliveries SET status = 'SENT', attempts = attempts + 1`,
				`INSERT INTO outbox.slot_backfills (slot_name) VALUES ('s')`, `DELETE FROM outbox.events`},
			[]string{insert, resend, logAction, `SELECT * FROM outbox.console_actions`, `ALTER TABLE outbox.events ADD COLUMN x int`, `TRUNCATE outbox.events`,
				`ALTER PUBLICATION outbox_relay ADD TABLE outbox.deliveries`, `CREATE TABLE outbox.x (a int)`}},
	}
	for _, c := range cases {
		t.Run(c.group, func(t *testing.T) {
			conn := loginAs(t, dbURL, c.group)
			for _, sql := range c.allowed {
				if !may(t, conn, sql) {
					t.Errorf("%s may not: %s", c.group, sql)
				}
			}
			for _, sql := range c.refused {
				if may(t, conn, sql) {
					t.Errorf("%s may: %s", c.group, sql)
				}
			}
		})
	}
}

// TestRoles_DatabasesOfOneClusterGrantingAtOnceAllSucceed: roles and the
// SET grant on wal_compression are the cluster's, not a database's, and the
// migration lock is a database's. So migrate run at once on two databases of
// one cluster both granted SET on wal_compression, and the second GRANT
// waited on the first and then failed its whole roles transaction ("tuple
// concurrently updated" where the parameter had a catalog row, a duplicate
// key where it had none; CI, on the shared test cluster). Each must
// succeed, the relay's role hold the grant, and a migrate that finds it
// granted must not wait on another database's at all.
func TestRoles_DatabasesOfOneClusterGrantingAtOnceAllSucceed(t *testing.T) {
	t.Parallel()
	if pgtest.Major(t) < 15 {
		t.Skip("PostgreSQL 14 grants no SET on a parameter")
	}
	ctx := context.Background()
	first := pgtest.Cluster(t, nil) // its own: the grants taken back are the cluster's
	pgtest.Migrate(t, first)
	admin := pgtest.Pool(t, first)
	pgtest.Exec(t, admin, `CREATE DATABASE second`)
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/second"
	second := u.String()
	pgtest.Migrate(t, second)
	for _, c := range []struct {
		name, before string
		waits        bool
	}{
		{"the parameter has a catalog row", `REVOKE SET ON PARAMETER wal_compression FROM outbox_relay;
			GRANT SET ON PARAMETER wal_compression TO outbox_writer`, true},
		{"the parameter has no catalog row", `REVOKE SET ON PARAMETER wal_compression FROM outbox_relay, outbox_writer`, true},
		{"the relay's role holds the grant", `GRANT SET ON PARAMETER wal_compression TO outbox_relay`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pgtest.Exec(t, admin, c.before)
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // committed below
			if _, err := tx.Exec(ctx, `GRANT SET ON PARAMETER wal_compression TO outbox_relay`); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			done := make(chan error, 1)
			go func() { done <- migrations.Roles(ctx, conn) }()
			if c.waits {
				pgtest.Eventually(t, 10*time.Second, "the second database's GRANT waiting on the first's", func() (bool, string) {
					n := pgtest.Count(t, admin, `SELECT count(*) FROM pg_stat_activity WHERE datname = 'second' AND wait_event_type = 'Lock'`)
					return n == 1, fmt.Sprintf("%d sessions of database second waiting on a lock", n)
				})
			} else {
				select {
				case err := <-done:
					done <- err
				case <-time.After(10 * time.Second):
					t.Fatal("roles on the second database waited on the first's open GRANT of what it already holds")
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("roles on the second database, granting at once with the first: %v", err)
			}
			if n := pgtest.Count(t, admin, `SELECT count(*) WHERE has_parameter_privilege('outbox_relay', 'wal_compression', 'SET')`); n != 1 {
				t.Fatal("outbox_relay may not set wal_compression")
			}
		})
	}
}
