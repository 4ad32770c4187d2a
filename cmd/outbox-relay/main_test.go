package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/redact"
	"github.com/outbox-relay/outbox-relay/relay"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestRun_BadConfigurationFailsAtStartNamingTheFlag(t *testing.T) {
	t.Parallel()
	ok := []string{"OUTBOX_DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db", "OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092"}
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"NoDatabaseURL", nil, []string{"OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092"}, "--database-url is required"},
		{"NoBrokers", nil, []string{"OUTBOX_DATABASE_URL", "postgres://x@h/db"}, "--kafka-brokers"},
		{"BrokerWithoutPort", []string{"--kafka-brokers", "kafka"}, ok, `--kafka-brokers: "kafka" is not host:port`},
		{"BadSlot", []string{"--slot", "My-Slot"}, ok, "--slot"},
		{"BatchSizeZero", []string{"--batch-size", "-1"}, ok, "--batch-size"},
		{"OldKafka", []string{"--kafka-version", "0.10.0"}, ok, "--kafka-version"},
		{"UnknownCompression", []string{"--kafka-compression", "brotli"}, ok, "--kafka-compression"},
		{"UnknownSASLMechanism", []string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-user", "u"}, ok,
			`--kafka-sasl-mechanism: "GSSAPI" is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"SCRAMWithoutUser", []string{"--kafka-sasl-mechanism", "SCRAM-SHA-256"}, ok, "--kafka-sasl-user is required"},
		{"UnknownPartitioner", []string{"--kafka-partitioner", "crc32"}, ok, "--kafka-partitioner"},
		{"ClientCertWithoutKey", []string{"--kafka-tls-cert-file", "/tmp/c.pem"}, ok, "--kafka-tls-key-file"},
		{"UnreadableClientCert", []string{"--kafka-tls-cert-file", "/nonexistent/c.pem", "--kafka-tls-key-file", "/nonexistent/k.pem"}, ok,
			"--kafka-tls-cert-file"},
		{"BadLogLevel", []string{"--log-level", "loud"}, ok, "--log-level"},
		{"NegativeMaxProcs", []string{"--max-procs", "-2"}, ok, "--max-procs"},
		{"GCPercentZero", nil, append([]string{"OUTBOX_GC_PERCENT", "0"}, ok...), "--gc-percent"},
		{"StatusLingerNotUnderInterval", []string{"--status-linger", "2s"}, ok, "--status-linger"},
		{"NegativeGapRecheck", nil, append([]string{"OUTBOX_GAP_RECHECK", "-1s"}, ok...), "--gap-recheck"},
		{"BadEnvDuration", nil, append([]string{"OUTBOX_SHUTDOWN_TIMEOUT", "soon"}, ok...), "OUTBOX_SHUTDOWN_TIMEOUT"},
		{"HistoryRetentionUnderAnHour", nil, append([]string{"OUTBOX_HISTORY_RETENTION", "30m"}, ok...), "--history-retention (30m0s) must be at least 1h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			code := runMain(ctx, append([]string{"run"}, tc.args...), &stdout, &stderr, env(tc.env...))
			if code == 0 {
				t.Fatalf("exit 0, want a failure; stderr: %s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), "pw@") {
				t.Fatalf("the database password reached stderr: %s", stderr.String())
			}
		})
	}
}

func TestRedact_HidesPasswordsInURLsAndDSNs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app:s3cret@db:5432/app?sslmode=require": "postgres://app:xxxxx@db:5432/app?sslmode=require",
		"postgres://app@db/app?password=s3cret":             "postgres://app@db/app?password=xxxxx",
		"host=db user=app password=s3cret dbname=app":       "host=db user=app password=xxxxx dbname=app",
		"host=db password='s 3cret' dbname=app":             "host=db password=xxxxx dbname=app",
		"postgres://app@db/app":                             "postgres://app@db/app",
		"postgres://app:s3cret@db:port/app":                 "postgres://app:xxxxx@db:port/app",
	} {
		if got := redact.URL(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redact.URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMigrate_PrintWritesTheSchemaWithoutADatabase(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"migrate", "--print"}, &stdout, &stderr, env()); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"CREATE PUBLICATION outbox_relay",
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS events_key_idx ON outbox.events (key, id) WHERE key IS NOT NULL;"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("printed SQL lacks %s:\n%s", want, stdout.String())
		}
	}
}

func TestRun_SecretsNeverReachTheLogs(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.Cluster(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// PostgreSQL is unreachable, so connection errors are logged while the
	// relay retries; the broker is up and ignores SASL settings here.
	code := runMain(ctx, []string{"run", "--log-level", "debug", "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "relay"}, &stdout, &stderr, env(
		"OUTBOX_DATABASE_URL", "postgres://app:db-s3cret@127.0.0.1:1/app?connect_timeout=1",
		"OUTBOX_KAFKA_BROKERS", cluster.ListenAddrs()[0],
		"OUTBOX_KAFKA_SASL_PASSWORD", "sasl-s3cret",
	))
	if code != 0 {
		t.Logf("exit %d", code)
	}
	out := stderr.String()
	if !strings.Contains(out, "starting outbox-relay") {
		t.Fatalf("the relay did not start; stderr:\n%s", out)
	}
	for _, secret := range []string{"db-s3cret", "sasl-s3cret"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q reached the logs:\n%s", secret, out)
		}
	}
}

func TestRun_ZeroTurnsOffTheKnobsWhoseHelpSaysSo(t *testing.T) {
	t.Parallel()
	getenv := env("OUTBOX_DATABASE_URL", "postgres://u@127.0.0.1:1/db", "OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092")
	// relay.Config reads 0 as "use the default" and a negative value as
	// "off": the command line must turn the user's 0 into the latter.
	cases := []struct {
		flag string
		got  func(relay.Config) time.Duration
	}{
		{"--retention", func(c relay.Config) time.Duration { return c.Retention }},
		{"--spill-after", func(c relay.Config) time.Duration { return c.SpillAfter }},
		{"--status-linger", func(c relay.Config) time.Duration { return c.StatusLinger }},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			t.Parallel()
			c, _, err := runFlags([]string{tc.flag, "0"}, io.Discard, io.Discard, getenv)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(c); got >= 0 {
				t.Fatalf("%s 0 reached the relay as %s, which it reads as its default; want it off (negative)", tc.flag, got)
			}
		})
	}
}
