package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// runUntilError runs a relay that is expected to stop by itself with an
// error, and returns the error and how long it took.
func runUntilError(t *testing.T, cfg relay.Config, within time.Duration) (time.Duration, error) {
	if testing.Verbose() {
		cfg.Logger = zaptest.NewLogger(t)
	}
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	start := time.Now()
	err = r.Run(ctx)
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the relay was still running after %s; want it to stop with an error", within)
	}
	if err == nil {
		t.Fatal("the relay stopped without an error")
	}
	return took, err
}

func TestKafka_KeyedEventsLandOnTheJavaClientsPartition(t *testing.T) {
	t.Parallel()
	const partitions, keys, unkeyed = 7, 300, 70
	b := setup(t, kfake.SeedTopics(partitions, "accounts"))
	b.startRelay(t, b.config(t))
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'accounts', 'account-' || n, jsonb_build_object('n', n) FROM generate_series(1, $1) AS n`, keys)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'accounts', NULL, jsonb_build_object('n', n) FROM generate_series(1, $1) AS n`, unkeyed)
	b.waitStatus(t, "SENT", keys+unkeyed, 30*time.Second)

	// franz-go's default partitioner is an independent implementation of
	// the Java client's toPositive(murmur2(key)) % partitions.
	java := kgo.StickyKeyPartitioner(nil).ForTopic("accounts")
	unkeyedOn := map[int32]bool{}
	checked := 0
	for _, rec := range kafkatest.Consume(t, b.brokers, keys+unkeyed, 30*time.Second, "accounts") {
		if rec.Key == nil {
			unkeyedOn[rec.Partition] = true
			continue
		}
		checked++
		if want := java.Partition(&kgo.Record{Key: rec.Key}, partitions); rec.Partition != int32(want) {
			t.Errorf("key %s on partition %d, the Java client puts it on %d", rec.Key, rec.Partition, want)
		}
	}
	if checked != keys {
		t.Fatalf("checked %d keyed records, want %d", checked, keys)
	}
	if len(unkeyedOn) < 2 {
		t.Errorf("%d events without a key all landed on partition(s) %v; want them spread", unkeyed, unkeyedOn)
	}
}

func TestKafka_SCRAMConnectsAndDelivers(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.Superuser(mech, "relay", "relay-pw"))
			cfg := b.config(t)
			cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = mech, "relay", "relay-pw"
			b.startRelay(t, cfg)
			b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
			b.waitStatus(t, "SENT", 1, 30*time.Second)
		})
	}
}

func TestKafka_WrongSCRAMPasswordFailsAtStartWithoutBurningAnAttempt(t *testing.T) {
	t.Parallel()
	const password = "not-the-password-7f3a"
	b := setup(t, kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "relay", "relay-pw"))
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
	core, logs := observer.New(zap.DebugLevel)
	cfg := b.config(t)
	cfg.Logger = zap.New(core)
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "SCRAM-SHA-512", "relay", password

	took, err := runUntilError(t, cfg, 30*time.Second)
	t.Logf("stopped after %s: %v", took.Round(time.Millisecond), err)
	for _, want := range []string{`"relay"`, "SCRAM-SHA-512", "--kafka-sasl-password"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if took > 10*time.Second {
		t.Errorf("took %s to give up on wrong credentials; want a start-up error within seconds", took)
	}
	for _, e := range logs.All() {
		if line := fmt.Sprintf("%s %v", e.Message, e.ContextMap()); strings.Contains(line, password) {
			t.Errorf("the password reached the log: %s", line)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("the password is in the error: %v", err)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries`); n != 0 {
		t.Errorf("%d delivery rows after a start-up failure; want none (no attempt burned)", n)
	}
}

func TestKafka_WrongCredentialsMetAfterAnUnreachableStartAreLoggedAndBurnNoAttempt(t *testing.T) {
	t.Parallel()
	const password = "not-the-password-5c1e"
	sasl := []kfake.Opt{kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "relay", "relay-pw")}
	b := setup(t, sasl...)
	addr := b.cluster.ListenAddrs()[0]
	b.cluster.Close()
	core, logs := observer.New(zap.InfoLevel)
	cfg := b.config(t)
	cfg.Logger = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "SCRAM-SHA-512", "relay", password
	cfg.ShutdownTimeout = time.Second // the event stays undelivered: no drain to wait for
	// Nothing answers: the relay cannot know yet that the password is wrong.
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)

	restartKafka(t, addr, sasl...)
	pgtest.Eventually(t, 30*time.Second, "the refusal logged at ERROR", func() (bool, string) {
		n := logs.FilterMessageSnippet("kafka refuses the relay's configuration").FilterLevelExact(zap.ErrorLevel).Len()
		return n > 0, fmt.Sprintf("%d such lines", n)
	})
	for _, e := range logs.All() {
		if line := fmt.Sprintf("%s %v", e.Message, e.ContextMap()); strings.Contains(line, password) {
			t.Errorf("the password reached the log: %s", line)
		}
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE attempts > 0 OR status <> 'PENDING'`); n != 0 {
		t.Errorf("%d delivery rows with an attempt or a final status; want none (no attempt burned)", n)
	}
}

func TestKafka_MutualTLSDeliversAndAMissingClientCertificateIsRefused(t *testing.T) {
	t.Parallel()
	m := kafkatest.NewMutualTLS(t)
	b := setup(t, kfake.SeedTopics(1, "orders"), kfake.TLS(m.Broker))
	cfg := b.config(t)
	cfg.Kafka.TLSCAFile = m.CAFile

	took, err := runUntilError(t, cfg, 30*time.Second)
	t.Logf("without a client certificate: stopped after %s: %v", took.Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "requires a client certificate") || !strings.Contains(err.Error(), "--kafka-tls-cert-file") {
		t.Errorf("error %q does not say that a client certificate is needed and how to give one", err)
	}

	cfg.Kafka.TLSCertFile, cfg.Kafka.TLSKeyFile = m.CertFile, m.KeyFile
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	cl := newKgo(t, b.brokers, kgo.DialTLSConfig(m.Client), kgo.ConsumeTopics("orders"))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if recs := cl.PollFetches(ctx).Records(); len(recs) != 1 || string(recs[0].Value) != `{"n": 1}` {
		t.Fatalf("read %d records over mutual TLS, want the one event", len(recs))
	}
}

func TestKafka_ANullPayloadIsPublishedAsATombstone(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "accounts"))
	b.exec(t, `ALTER TABLE outbox.events ALTER payload DROP NOT NULL`)
	b.startRelay(t, b.config(t))
	b.exec(t, `INSERT INTO outbox.events (id, topic, key, payload, event_type) VALUES
		('00000000-0000-0000-0000-000000000001', 'accounts', 'account-1', NULL, 'account.deleted'),
		('00000000-0000-0000-0000-000000000002', 'accounts', NULL, NULL, 'account.deleted')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)

	recs := kafkatest.Consume(t, b.brokers, 1, 15*time.Second, "accounts")
	if len(recs) != 1 {
		t.Fatalf("%d records, want the tombstone alone", len(recs))
	}
	rec := recs[0]
	if rec.Value != nil || string(rec.Key) != "account-1" {
		t.Errorf("record key %q value %q (nil: %v); want key account-1 and a null value", rec.Key, rec.Value, rec.Value == nil)
	}
	if id, _ := header(rec, kafka.HeaderEventID); id != "00000000-0000-0000-0000-000000000001" {
		t.Errorf("%s header %q", kafka.HeaderEventID, id)
	}
	if et, _ := header(rec, kafka.HeaderEventType); et != "account.deleted" {
		t.Errorf("%s header %q", kafka.HeaderEventType, et)
	}
	r := b.waitFor(t, "00000000-0000-0000-0000-000000000002", "FAILED")
	if r.reason != relay.ReasonInvalidEvent || !strings.Contains(r.lastError, "a tombstone needs a key") {
		t.Errorf("a NULL payload with a NULL key: %+v, want FAILED INVALID_EVENT saying a tombstone needs a key", r)
	}
}

// The ACLs docs/running.md lists are all the relay needs; without any WRITE (and
// so no producer id for the idempotent producer) it stops at start, exit 2,
// naming what to grant.
func TestKafka_TheLeastACLsTheDocsListAreEnoughAndNoWriteAtAllStopsTheRelay(t *testing.T) {
	t.Parallel()
	allow := func(topic string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	b := setup(t, kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "relay", "relay-pw", allow("orders", kmsg.ACLOperationWrite), allow("orders", kmsg.ACLOperationDescribe)),
		kfake.User("SCRAM-SHA-512", "reader", "reader-pw", allow("orders", kmsg.ACLOperationDescribe)))
	cfg := b.config(t)
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "SCRAM-SHA-512", "relay", "relay-pw"
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)

	cfg = b.config(t)
	cfg.Slot += "_reader"
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "SCRAM-SHA-512", "reader", "reader-pw"
	took, err := runUntilError(t, cfg, 30*time.Second)
	if !relay.IsSetup(err) || !strings.Contains(fmt.Sprint(err), "User:reader needs WRITE and DESCRIBE") ||
		!strings.Contains(fmt.Sprint(err), "IDEMPOTENT_WRITE on the cluster") {
		t.Fatalf("after %s: %v; want a setup error naming the ACLs", took, err)
	}
}
