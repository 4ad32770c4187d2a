package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func TestRun_SetupErrorsExitWithCode2WithinSecondsSayingWhatToDo(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.Cluster(t, kfake.SeedTopics(1, "orders")).ListenAddrs()[0]
	cases := []struct {
		name string
		// prepare returns the database URL and extra flags.
		prepare func(t *testing.T) (string, []string)
		want    []string
	}{
		{"NeverMigrated", func(t *testing.T) (string, []string) { return pgtest.NewDB(t), nil },
			[]string{"outbox schema does not exist", "outbox-relay migrate"}},
		{"NeverMigratedInPollMode", func(t *testing.T) (string, []string) { return pgtest.NewDB(t), []string{"--mode", "poll"} },
			[]string{"outbox-relay migrate"}},
		{"SlotOfAnotherDatabase", func(t *testing.T) (string, []string) {
			_, otherPool := pgtest.Migrated(t)
			slot := uniqueSlot(t)
			pgtest.Exec(t, otherPool, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
			url, _ := pgtest.Migrated(t)
			return pgtest.RelayURL(url), []string{"--slot", slot}
		}, []string{"belongs to database", "--slot"}},
		{"SlotOfAnotherPlugin", func(t *testing.T) (string, []string) {
			url, pool := pgtest.Migrated(t)
			slot := uniqueSlot(t)
			pgtest.Exec(t, pool, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot)
			return pgtest.RelayURL(url), []string{"--slot", slot}
		}, []string{"test_decoding", "pgoutput slot"}},
		{"PublicationWithoutInserts", func(t *testing.T) (string, []string) {
			url, pool := pgtest.Migrated(t)
			pgtest.Exec(t, pool, `CREATE PUBLICATION updates_only FOR TABLE outbox.events WITH (publish = 'update')`)
			return pgtest.RelayURL(url), []string{"--publication", "updates_only"}
		}, []string{"publish inserts", "ALTER PUBLICATION"}},
		{"SlotFailoverBefore17", func(t *testing.T) (string, []string) {
			url, _ := pgtest.Migrated(t)
			return pgtest.RelayURL(url), []string{"--slot-failover"}
		}, []string{"--slot-failover needs PostgreSQL 17"}},
		{"WalLevelNotLogical", func(t *testing.T) (string, []string) {
			url := pgtest.Cluster(t, nil, "wal_level=replica", "max_wal_senders=0")
			pgtest.Migrate(t, url)
			return pgtest.RelayURL(url), nil
		}, []string{"wal_level", "wal_level=logical"}},
		{"AllReplicationSlotsTaken", func(t *testing.T) (string, []string) {
			url := pgtest.Cluster(t, nil, "max_replication_slots=2")
			pgtest.Migrate(t, url)
			pool := pgtest.Pool(t, url)
			pgtest.Exec(t, pool, `SELECT pg_create_logical_replication_slot('other_a', 'pgoutput')`)
			pgtest.Exec(t, pool, `SELECT pg_create_logical_replication_slot('other_b', 'test_decoding')`)
			return pgtest.RelayURL(url), nil
		}, []string{"all replication slots are in use", "max_replication_slots = 2", "other_a (postgres, inactive)", "other_b"}},
		{"WrongPassword", func(t *testing.T) (string, []string) {
			url := pgtest.Cluster(t, []string{"--auth-host=scram-sha-256"})
			// No sslmode: pgconn tries TLS first (prefer), which the server refuses.
			return strings.Replace(strings.Replace(url, "postgres@", "postgres:wrong-pw@", 1), "?sslmode=disable", "", 1), nil
		}, []string{"password authentication failed", "SQLSTATE 28P01", "--database-url"}},
		{"UnknownRole", func(t *testing.T) (string, []string) {
			return withUser(t, pgtest.NewDB(t), "no_such_role"), nil
		}, []string{`role "no_such_role" does not exist`, "--database-url"}},
		{"MissingDatabase", func(t *testing.T) (string, []string) {
			return withDatabase(t, pgtest.NewDB(t), "no_such_db"), nil
		}, []string{`database "no_such_db" does not exist`, "--database-url"}},
		{"LoginRoleWithoutReplication", func(t *testing.T) (string, []string) {
			url, _ := pgtest.Migrated(t)
			return withUser(t, url, newRole(t, url, "norepl", "LOGIN IN ROLE outbox_relay")), nil
		}, []string{"REPLICATION attribute", "ALTER ROLE \"norepl_", "REPLICATION (on Amazon RDS", "GRANT rds_replication TO"}},
		{"RoleWithTheWritersRights", func(t *testing.T) (string, []string) {
			url, _ := pgtest.Migrated(t)
			return withUser(t, url, newRole(t, url, "writer", "LOGIN REPLICATION IN ROLE outbox_writer")), nil
		}, []string{"lacks rights that outbox_relay has", "DELETE ON outbox.deliveries", " more; run GRANT outbox_relay TO \"writer_"}},
		{"RoleWithoutAnyGrant", func(t *testing.T) (string, []string) {
			url, _ := pgtest.Migrated(t)
			return withUser(t, url, newRole(t, url, "nobody", "LOGIN REPLICATION")), nil
		}, []string{"USAGE ON SCHEMA outbox", "GRANT outbox_relay TO \"nobody_"}},
		{"RoleMissingOneGrant", func(t *testing.T) (string, []string) {
			url, pool := pgtest.Migrated(t)
			role := newRole(t, url, "partial", "LOGIN REPLICATION IN ROLE outbox_operator")
			pgtest.Exec(t, pool, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA outbox TO "+role)
			pgtest.Exec(t, pool, "REVOKE ALL ON outbox.dead_letter_topics FROM "+role)
			return withUser(t, url, role), nil
		}, []string{"INSERT ON outbox.dead_letter_topics", "GRANT outbox_relay TO"}},
		{"TLSRequiredButNotOffered", func(t *testing.T) (string, []string) {
			return strings.Replace(pgtest.NewDB(t), "sslmode=disable", "sslmode=require", 1), nil
		}, []string{"does not offer TLS", "sslmode"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL, flags := tc.prepare(t)
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			code := runMain(ctx, append([]string{"run", "--log-format", "console", "--slot", uniqueSlot(t)}, flags...),
				&stdout, &stderr, env("OUTBOX_DATABASE_URL", dbURL, "OUTBOX_KAFKA_BROKERS", brokers, "OUTBOX_KAFKA_METADATA_RETRIES", "1",
					"OUTBOX_METRICS_ADDR", "127.0.0.1:0"))
			took := time.Since(start)
			if code != 2 || took > 5*time.Second {
				t.Fatalf("exit %d after %s, want 2 within seconds; stderr:\n%s", code, took, stderr.String())
			}
			last := lastLine(stderr.String())
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("the message %q does not say %q", last, w)
				}
			}
			if !strings.Contains(stderr.String(), `"setup_problem": true`) {
				t.Errorf("the cause is not in the log:\n%s", stderr.String())
			}
			if strings.Contains(stderr.String(), "tls error") {
				t.Errorf("a refused TLS attempt is reported as the cause:\n%s", stderr.String())
			}
		})
	}
}

// uniqueSlot is a slot name no other test uses (slots are cluster-wide).
func uniqueSlot(*testing.T) string {
	return fmt.Sprintf("setup_%d", time.Now().UnixNano())
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func withUser(t *testing.T, dbURL, user string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

func withDatabase(t *testing.T, dbURL, db string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}
