package main

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// every command, with arguments that make it valid apart from the database.
var commandArgs = map[string][]string{
	"run": nil, "migrate": nil, "failed": nil, "resend": {"--failed"}, "held": nil,
	"skip": {"--failed"}, "purge": {"--older-than", "7d"}, "status": nil, "console": {"--listen", "127.0.0.1:0"},
}

func runCLI(t *testing.T, getenv func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = runMain(ctx, args, &out, &errb, getenv)
	return out.String(), errb.String(), code
}

func TestCLI_UsageErrorsExit64OnOneLineWithAPointerToHelp(t *testing.T) {
	t.Parallel()
	getenv := env("OUTBOX_DATABASE_URL", "postgres://u@127.0.0.1:1/db", "OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"purgee"}, `unknown command "purgee"; did you mean "purge"?`},
		{[]string{"purge", "--older-than", "7d", "--topc", "x"}, "unknown flag --topc; did you mean --topic?"},
		{[]string{"run", "--kafka-broker", "x:1"}, "did you mean --kafka-brokers?"},
		{[]string{"purge"}, "--older-than is required (or OUTBOX_PURGE_OLDER_THAN)"},
		{[]string{"purge", "--older-than", "a week"}, "--older-than"},
		{[]string{"failed", "--limit", "0"}, "--limit must be at least 1"},
		{[]string{"failed", "--since", "yesterday"}, "--since"},
		{[]string{"resend"}, "give event ids"},
		{[]string{"skip", "--failed", "00000000-0000-0000-0000-000000000001"}, "not both"},
		{[]string{"status", "extra"}, `unexpected argument "extra"`},
		{[]string{"run", "--batch-size", "-1"}, "--batch-size"},
		{[]string{"console", "--listen", "0.0.0.0:8080"}, "not a loopback address: set --admin-token"},
		{[]string{"console", "--admin-token", "admin-5c1e"}, "--admin-token: at least 16 characters"},
		{[]string{"console", "--admin-token", "admin-5c1e-8d0f-a7b3", "--read-token", "admin-5c1e-8d0f-a7b3"},
			"--admin-token is the same as --read-token"},
		{[]string{"console", "--tls-cert-file", "cert.pem"}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"console", "--allowed-hosts", "https://console.example"}, "--allowed-hosts"},
		{[]string{"run", "--console-addr", "127.0.0.1:0", "--console-read-token", "read-7f3a"}, "--console-read-token: at least 16 characters"},
		{[]string{"run", "--console-addr", "0.0.0.0:0"}, "--console-addr 0.0.0.0:0 is not a loopback address: set --console-admin-token"},
		{[]string{"run", "--dead-letter-topic", "dead letters"}, `--dead-letter-topic "dead letters": a Kafka topic name`},
		{[]string{"run", "--cloudevents", "json"}, `--cloudevents "json": binary, structured, or empty for none`},
		{[]string{"run", "--cloudevents-default-type", "x"}, "--cloudevents-default-type need --cloudevents binary or structured"},
		{[]string{"run", "--cloudevents", "binary", "--cloudevents-source", "/shop db/orders"}, `--cloudevents-source: "/shop db/orders" is not a URI-reference`},
		{[]string{"run", "--cloudevents", "binary", "--cloudevents-default-type", "order\ncreated"}, "--cloudevents-default-type: CloudEvents attribute type holds control character"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			_, stderr, code := runCLI(t, getenv, tc.args...)
			if code != flagenv.ExitUsage {
				t.Errorf("exit %d, want %d (usage)", code, flagenv.ExitUsage)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[1], "--help") {
				t.Errorf("stderr:\n%s\nwant one line saying %q, then a pointer to --help", stderr, tc.want)
			}
		})
	}
}

func TestCLI_EveryCommandsHelpGoesToStdoutWithItsArgumentsVariablesAndRequiredFlags(t *testing.T) {
	t.Parallel()
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runCLI(t, env(), name, "--help")
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing on stderr", code, stderr)
			}
			for _, want := range []string{"Usage: outbox-relay " + name, "--database-url string", "OUTBOX_DATABASE_URL"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("help does not say %q:\n%s", want, stdout)
				}
			}
			if name != "migrate" && !strings.Contains(stdout, "--database-url string  (required)") {
				t.Errorf("help does not mark --database-url required:\n%s", stdout)
			}
			if (name == "resend" || name == "skip") && !strings.Contains(stdout, "Arguments:\n  ID...") {
				t.Errorf("help does not list the event ids it takes:\n%s", stdout)
			}
			if name != "run" && name != "migrate" && !strings.Contains(stdout, "OUTBOX_"+strings.ToUpper(name)+"_") {
				t.Errorf("help does not name the command's own variables (OUTBOX_%s_...):\n%s", strings.ToUpper(name), stdout)
			}
		})
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		if stdout, _, code := runCLI(t, env(), args...); code != 0 || !strings.Contains(stdout, "Exit codes:") {
			t.Errorf("outbox-relay %s: exit %d, want 0 and the usage on stdout", args[0], code)
		}
	}
}

func TestCLI_NoSecretReachesAnyOutput(t *testing.T) {
	t.Parallel()
	secrets := []string{"db-s3cret", "sasl-s3cret", "metrics-s3cret"}
	vars := []string{
		"OUTBOX_DATABASE_URL", "postgres://relay:db-s3cret@127.0.0.1:1/app?connect_timeout=1",
		"OUTBOX_KAFKA_BROKERS", "127.0.0.1:1",
		"OUTBOX_KAFKA_SASL_MECHANISM", "PLAIN", "OUTBOX_KAFKA_SASL_USER", "relay",
		"OUTBOX_KAFKA_SASL_PASSWORD", "sasl-s3cret",
		"OUTBOX_STATUS_METRICS_URL", "http://ops:metrics-s3cret@127.0.0.1:1/metrics",
		"OUTBOX_METRICS_ADDR", "127.0.0.1:0",
	}
	malformed := append(slices.Clone(vars), "OUTBOX_DATABASE_URL", "postgres://relay:db-s3cret@127.0.0.1:port/app")
	var calls [][]string
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		valid := append([]string{name}, commandArgs[name]...)
		calls = append(calls, []string{name, "--help"}, append(slices.Clone(valid), "--no-such-flag"),
			append(slices.Clone(valid), "--database-url"), valid)
	}
	calls = append(calls, []string{"run", "--log-level", "debug", "--shutdown-timeout", "1s"})
	for _, getenv := range []func(string) string{env(vars...), env(malformed...)} {
		for _, args := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var out, errb bytes.Buffer
			code := runMain(ctx, args, &out, &errb, getenv)
			cancel()
			for _, s := range secrets {
				if strings.Contains(out.String()+errb.String(), s) {
					t.Errorf("outbox-relay %s (exit %d) printed %q:\n%s%s", strings.Join(args, " "), code, s, out.String(), errb.String())
				}
			}
		}
	}
}

func TestCLI_OperatorCommandsOnAnUnmigratedDatabaseSayToRunMigrate(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	for name, args := range commandArgs {
		if name == "run" || name == "migrate" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), append([]string{name}, args...)...)
			if code != flagenv.ExitSetup || !strings.Contains(stderr, "run `outbox-relay migrate`") || strings.Contains(stderr, "SQLSTATE") {
				t.Errorf("exit %d, stderr %q; want %d saying to run migrate, not a raw SQL error", code, stderr, flagenv.ExitSetup)
			}
		})
	}
}

func TestMigrate_WarnsWhenWalLevelIsNotLogical(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.Cluster(t, nil, "wal_level=replica", "max_wal_senders=0")
	stdout, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), "migrate")
	if code != 0 || !strings.Contains(stdout, "outbox schema is at version") {
		t.Fatalf("migrate: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, `warning: wal_level is "replica"`) || !strings.Contains(stderr, "wal_level=logical") {
		t.Errorf("migrate on wal_level=replica said nothing of it: %q", stderr)
	}
}

func TestPurge_ReadsItsOwnVariablesAndTheOldOnesWithAWarning(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at) VALUES
			('orders', '{}', now() - interval '8 days'), ('payments', '{}', now() - interval '8 days'),
			('orders', '{}', now() - interval '1 day') RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status) SELECT id, 'SENT' FROM ev`); err != nil {
		t.Fatal(err)
	}
	// A deployment's OUTBOX_TOPIC is not purge's: OUTBOX_PURGE_TOPIC is.
	stdout, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL, "OUTBOX_PURGE_TOPIC", "orders", "OUTBOX_PURGE_OLDER_THAN", "7d"), "purge")
	if code != 0 || !strings.Contains(stdout, "purged 1 SENT events created more than 7d ago") || stderr != "" {
		t.Fatalf("purge with OUTBOX_PURGE_TOPIC and 7d: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, env("OUTBOX_DATABASE_URL", dbURL, "OUTBOX_TOPIC", "payments"), "purge", "--older-than", "7d")
	if code != 0 || !strings.Contains(stdout, "purged 1 SENT events") || !strings.Contains(stderr, "rename it OUTBOX_PURGE_TOPIC") {
		t.Fatalf("purge with the old OUTBOX_TOPIC: exit %d\n%s%s; want it read, with a warning", code, stdout, stderr)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events`); n != 1 {
		t.Fatalf("%d events left, want the one of yesterday", n)
	}
}

func TestSkipAndResend_TakeTheFiltersOfFailed(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, payload, event_type) VALUES
			('orders', '{}', 'a'), ('orders', '{}', 'b'), ('payments', '{}', 'a') RETURNING id, topic, event_type)
		INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, updated_at)
		SELECT id, 'FAILED', 1, CASE topic WHEN 'payments' THEN 'INVALID_TOPIC' ELSE 'MESSAGE_TOO_LARGE' END, 'no',
		       now() - CASE event_type WHEN 'b' THEN interval '3 days' ELSE interval '1 hour' END
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		stdout, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return strings.TrimSpace(stdout)
	}
	if got := run("failed", "--count", "--until", "2d"); got != "1" {
		t.Fatalf("failed --until 2d counted %s, want the one that failed 3 days ago", got)
	}
	if got := run("skip", "--failed", "--reason", "invalid_topic"); got != "skipped 1 failed events" {
		t.Fatalf("skip --failed --reason: %q", got)
	}
	if got := run("resend", "--failed", "--topic", "orders", "--since", "1d"); got != "resent 1 failed events" {
		t.Fatalf("resend --failed --since 1d: %q", got)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries GROUP BY status ORDER BY status LIMIT 1`); n != 1 {
		t.Fatalf("want one row in each of FAILED, PENDING, SKIPPED")
	}
	if got := run("failed", "--count"); got != "1" {
		t.Fatalf("%s still FAILED, want the one of 3 days ago", got)
	}
}

func TestFailedSkipAndResend_SearchByKeyAndByATextOfTheLastError(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	if _, err := pool.Exec(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload) VALUES
			('orders', 'alice', '{}'), ('orders', 'alice', '{}'), ('orders', 'bob', '{}') RETURNING id, key, payload)
		INSERT INTO outbox.deliveries (event_id, topic, key, status, attempts, failure_reason, last_error)
		SELECT id, 'orders', key, 'FAILED', 1, 'INVALID_TOPIC',
		       CASE WHEN key = 'bob' THEN 'broker said Needle' ELSE 'broker said no' END FROM ev`); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		stdout, stderr, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return strings.TrimSpace(stdout)
	}
	for args, want := range map[string]string{"--key alice": "2", "--error-contains Needle": "1", "--error-contains needle": "0",
		"--key alice --error-contains Needle": "0"} {
		if got := run(append([]string{"failed", "--count"}, strings.Fields(args)...)...); got != want {
			t.Errorf("failed --count %s: %s, want %s", args, got, want)
		}
	}
	if got := run("failed", "--key", "bob", "--format", "json"); !strings.Contains(got, `"key":"bob"`) || strings.Contains(got, "alice") {
		t.Errorf("failed --key bob lists %s", got)
	}
	if got := run("skip", "--failed", "--error-contains", "Needle"); got != "skipped 1 failed events" {
		t.Errorf("skip --failed --error-contains: %q", got)
	}
	if got := run("resend", "--failed", "--key", "alice"); got != "resent 2 failed events" {
		t.Errorf("resend --failed --key: %q", got)
	}
	if _, _, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL), "failed", "--since", "2026-11-26T10:00:00Z", "--until", "2026-11-26T09:00:00Z"); code != 64 {
		t.Errorf("--until before --since: exit %d, want 64", code)
	}
}
