package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// newRole creates a role of dbURL's cluster with attrs (such as "LOGIN
// REPLICATION IN ROLE outbox_relay"), dropped when the test ends with what
// it owns in dbURL's database ("": none), and returns its name.
func newRole(t *testing.T, dbURL, prefix, attrs string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	admin := pgtest.Pool(t, pgtest.AdminURL(t))
	pgtest.Exec(t, admin, "CREATE ROLE "+name+" "+attrs)
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, dbURL); dbURL != "" && err == nil {
			_, _ = conn.Exec(ctx, "DROP OWNED BY "+name)
			conn.Close(ctx)
		}
		_, _ = admin.Exec(ctx, "DROP ROLE "+name)
	})
	return name
}

func TestMigrate_RefusesAnOutboxSchemaAnotherRoleOwnsOrMayCreateIn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, dbURL string) string // returns the role at fault
		want    []string
	}{
		{"OwnedByAnotherRole", func(t *testing.T, dbURL string) string {
			other := newRole(t, dbURL, "squatter", "NOLOGIN")
			pgtest.Exec(t, pgtest.Pool(t, dbURL), "CREATE SCHEMA outbox AUTHORIZATION "+other)
			return other
		}, []string{"owns it", "could drop or replace", "ALTER SCHEMA outbox OWNER TO"}},
		{"AnotherRoleMayCreateInIt", func(t *testing.T, dbURL string) string {
			other := newRole(t, dbURL, "squatter", "NOLOGIN")
			pgtest.Exec(t, pgtest.Pool(t, dbURL), "CREATE SCHEMA outbox; GRANT CREATE ON SCHEMA outbox TO "+other)
			return other
		}, []string{"may create objects in it", "REVOKE CREATE ON SCHEMA outbox FROM"}},
		{"EveryoneMayCreateInIt", func(t *testing.T, dbURL string) string {
			pgtest.Exec(t, pgtest.Pool(t, dbURL), "CREATE SCHEMA outbox; GRANT CREATE ON SCHEMA outbox TO PUBLIC")
			return "PUBLIC"
		}, []string{"REVOKE CREATE ON SCHEMA outbox FROM PUBLIC"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDB(t)
			culprit := tc.prepare(t, dbURL)
			_, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), "migrate")
			if code != flagenv.ExitSetup {
				t.Fatalf("migrate into a foreign outbox schema: exit %d, want %d; stderr %q", code, flagenv.ExitSetup, stderr)
			}
			for _, w := range append(tc.want, culprit) {
				if !strings.Contains(stderr, w) {
					t.Errorf("the message %q does not say %q", stderr, w)
				}
			}
			pool := pgtest.Pool(t, dbURL)
			if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_class WHERE relnamespace = 'outbox'::regnamespace`); n != 0 {
				t.Errorf("migrate built %d objects in the foreign schema", n)
			}
		})
	}
}

func TestCLI_OperatorCommandsWithoutTheOperatorsRightsExit2NamingTheGrant(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.Migrated(t)
	writer := newRole(t, dbURL, "app", "LOGIN IN ROLE outbox_writer")
	cases := []struct {
		role     string
		commands []string
		want     string // a right the message names
	}{
		// The writer may read nothing: every command stops at once.
		{writer, []string{"failed", "resend", "held", "skip", "purge", "status", "console"}, "SELECT ON outbox.deliveries"},
		// The relay reads everything, but its role may not change status
		// rows through the operator's functions.
		{pgtest.RelayRole, []string{"resend", "skip", "purge"}, "EXECUTE ON FUNCTION outbox.purge("},
	}
	for _, c := range cases {
		for _, name := range c.commands {
			t.Run(strings.SplitN(c.role, "_", 2)[0]+"/"+name, func(t *testing.T) {
				t.Parallel()
				_, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", withUser(t, dbURL, c.role)), append([]string{name}, commandArgs[name]...)...)
				if code != flagenv.ExitSetup {
					t.Fatalf("%s as %s: exit %d, want %d; stderr %q", name, c.role, code, flagenv.ExitSetup, stderr)
				}
				for _, w := range []string{"GRANT outbox_operator TO \"" + c.role + "\"", c.want} {
					if !strings.Contains(stderr, w) {
						t.Errorf("the message %q does not say %q", stderr, w)
					}
				}
			})
		}
	}
}

func TestMigrate_ADatabaseOwnerWithCreateroleMigratesAndOperatorsResendThroughItsFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dba := newRole(t, "", "dba", "LOGIN CREATEROLE") // no superuser; dropped after its database
	dbURL := pgtest.NewDB(t)
	admin := pgtest.Pool(t, dbURL)
	pgtest.Exec(t, admin, "ALTER DATABASE "+strings.TrimPrefix(mustPath(t, dbURL), "/")+" OWNER TO "+dba)
	if out, errOut, code := runCLI(t, env("OUTBOX_DATABASE_URL", withUser(t, dbURL, dba)), "migrate"); code != 0 {
		t.Fatalf("migrate as the database owner with CREATEROLE: exit %d\n%s%s", code, out, errOut)
	}
	oncall := newRole(t, dbURL, "oncall", "LOGIN IN ROLE outbox_operator")
	var id string
	if err := admin.QueryRow(ctx, `WITH ev AS (INSERT INTO outbox.events (topic, payload) VALUES ('orders', '{}') RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason) SELECT id, 'FAILED', 3, 'RETRIES_EXHAUSTED' FROM ev
		RETURNING event_id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	run := cliAs(ctx, withUser(t, dbURL, oncall))
	if out, errOut, code := run("resend", id); code != 0 {
		t.Fatalf("resend as an operator: exit %d\n%s%s", code, out, errOut)
	}
	if n := pgtest.Count(t, admin, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING' AND attempts = 0`); n != 1 {
		t.Errorf("%d events resent, want 1", n)
	}
	if _, errOut, code := run("purge", "--older-than", "1ms", "--status", "SENT"); code != 0 {
		t.Errorf("purge as an operator: exit %d\n%s", code, errOut)
	}
	if n := pgtest.Count(t, admin, `SELECT count(*) FROM outbox.events`); n != 1 {
		t.Errorf("purge of SENT events deleted the PENDING one: %d events left", n)
	}
}

func mustPath(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}
