package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// row is one delivery row as an operator sees it.
type row struct {
	status, reason, lastError string
	attempts                  int
}

func (b *testBundle) delivery(t *testing.T, id string) row {
	t.Helper()
	var r row
	var reason, lastErr *string
	err := b.pool.QueryRow(context.Background(), `SELECT status, failure_reason, last_error, attempts
		FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&r.status, &reason, &lastErr, &r.attempts)
	if err != nil {
		t.Fatalf("delivery row of %s: %v", id, err)
	}
	if reason != nil {
		r.reason = *reason
	}
	if lastErr != nil {
		r.lastError = *lastErr
	}
	return r
}

// insertAround inserts good events before and after the bad one and returns
// the bad one's id.
func (b *testBundle) insertAround(t *testing.T, badTopic, badPayload string) string {
	t.Helper()
	var ids []string
	rows, err := b.pool.Query(context.Background(), `
		INSERT INTO outbox.events (topic, key, payload, event_type) VALUES
		  ('orders', 'k', '{"n": "before"}', 'good'), ($1, 'k', $2::jsonb, 'bad'), ('orders', 'k', '{"n": "after"}', 'good')
		RETURNING id::text, event_type`, badTopic, badPayload)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, et string
		if err := rows.Scan(&id, &et); err != nil {
			t.Fatal(err)
		}
		if et == "bad" {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("inserted %d bad events, want 1", len(ids))
	}
	return ids[0]
}

func (b *testBundle) waitFor(t *testing.T, id, status string) row {
	t.Helper()
	var r row
	pgtest.Eventually(t, 30*time.Second, fmt.Sprintf("event %s %s", id, status), func() (bool, string) {
		if pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE event_id = $1`, id) == 0 {
			return false, "no status row"
		}
		r = b.delivery(t, id)
		return r.status == status, fmt.Sprintf("%+v; %s", r, b.statusCounts(t))
	})
	return r
}

func TestRelay_MessageSpecificFailuresAreFailedAtOnceAndTheRestIsDelivered(t *testing.T) {
	t.Parallel()
	big := `{"pad": "` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, topic, payload, reason, errText string
		opts                                  []kfake.Opt
		maxMessageBytes                       int
		attempts                              int // 0: refused before it was sent
	}{
		{name: "MissingTopic", topic: "missing", payload: `{}`, reason: relay.ReasonInvalidTopic, errText: "does not exist"},
		{name: "InvalidTopicName", topic: "bad topic!", payload: `{}`, reason: relay.ReasonInvalidTopic, errText: "Kafka topic name is"},
		{name: "BrokerSizeLimit", topic: "orders", payload: big, reason: relay.ReasonMessageTooLarge, attempts: 1,
			opts: []kfake.Opt{kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000"})}},
		{name: "ClientSizeCheck", topic: "orders", payload: big, reason: relay.ReasonMessageTooLarge,
			errText: "MaxMessageBytes", maxMessageBytes: 2000}, // the client's own check: never sent
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, append([]kfake.Opt{kfake.SeedTopics(1, "orders")}, tc.opts...)...)
			cfg := b.config(t)
			cfg.Kafka.MaxMessageBytes = tc.maxMessageBytes
			core, logs := observer.New(zap.WarnLevel)
			cfg.Logger = zap.New(zapcore.NewTee(core, cfg.Logger.Core()))
			b.startRelay(t, cfg)
			id := b.insertAround(t, tc.topic, tc.payload)
			r := b.waitFor(t, id, "FAILED")
			if r.reason != tc.reason || r.attempts != tc.attempts || r.lastError == "" || !strings.Contains(r.lastError, tc.errText) {
				t.Fatalf("got %+v, want FAILED %s after %d attempts with the broker's words (%q)", r, tc.reason, tc.attempts, tc.errText)
			}
			failedLogged := logs.FilterMessageSnippet("event failed").FilterField(zap.String("event_id", id)).All()
			if len(failedLogged) != 1 {
				t.Fatalf("the failure was logged %d times at warn, want once; all warnings: %v", len(failedLogged), logs.All())
			}
			if f := failedLogged[0].ContextMap(); f["topic"] != tc.topic || f["reason"] != tc.reason || f["error"] != r.lastError {
				t.Errorf("the failure's log line has %v; want the topic %q, the reason %s and the last_error", f, tc.topic, tc.reason)
			}
			recs := kafkatest.Consume(t, b.brokers, 2, 15*time.Second, "orders")
			if len(recs) != 2 || string(recs[0].Value) != `{"n": "before"}` || string(recs[1].Value) != `{"n": "after"}` {
				t.Fatalf("events around the bad one: got %d records, want before and after", len(recs))
			}
		})
	}
}

func TestRelay_ResendAfterCreatingTheTopicDeliversTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.startRelay(t, b.config(t))
	id := b.insertAround(t, "late", `{"n": "late"}`)
	b.waitFor(t, id, "FAILED")

	adm := kadm.NewClient(newKgo(t, b.brokers))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, "late"); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	var resent int
	if err := b.pool.QueryRow(context.Background(), `SELECT outbox.resend_failed(p_topic => 'late')`).Scan(&resent); err != nil || resent != 1 {
		t.Fatalf("resend_failed = %d, %v; want 1", resent, err)
	}
	r := b.waitFor(t, id, "SENT")
	if r.attempts != 1 || r.reason != "" || r.lastError != "" {
		t.Fatalf("after resend: %+v, want SENT with attempts reset and the failure cleared", r)
	}
	if recs := kafkatest.Consume(t, b.brokers, 1, 15*time.Second, "late"); len(recs) != 1 {
		t.Fatalf("%d records on the created topic, want 1", len(recs))
	}
}

func TestRelay_UnauthorizedTopicFailsAndResendAfterGrantingTheACLDelivers(t *testing.T) {
	t.Parallel()
	allow := func(topic string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	b := setup(t, kfake.SeedTopics(1, "orders", "secret"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "relay", "relay-pw", allow("orders", kmsg.ACLOperationWrite), allow("orders", kmsg.ACLOperationDescribe),
			allow("secret", kmsg.ACLOperationDescribe)))
	cfg := b.config(t)
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "PLAIN", "relay", "relay-pw"
	b.startRelay(t, cfg)

	id := b.insertAround(t, "secret", `{"n": "secret"}`)
	r := b.waitFor(t, id, "FAILED")
	if r.reason != relay.ReasonUnauthorizedOnTopic {
		t.Fatalf("got %+v, want UNAUTHORIZED_ON_TOPIC", r)
	}
	admin := newKgo(t, b.brokers, kgo.SASL(plain.Auth{User: "admin", Pass: "admin"}.AsMechanism()))
	acl := kadm.NewACLs().Allow("User:relay").AllowHosts("*").Topics("secret").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := kadm.NewClient(admin).CreateACLs(context.Background(), acl); err != nil || res[0].Err != nil {
		t.Fatalf("granting the ACL: %v %v", err, res)
	}
	b.exec(t, `SELECT outbox.resend($1)`, id)
	b.waitFor(t, id, "SENT")
}

func newKgo(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestTopics_AnEventForATopicNotAllowedFailsNamingTheRuleAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "billing.invoice", "audit"))
	cfg := b.config(t)
	cfg.Kafka.Topics = []string{"orders", "billing.*"}
	srv, _ := b.serveMetrics(t, cfg)
	b.waitStreaming(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES
		('orders', 'k', '{"n": 1}'), ('audit', 'k', '{"n": 2}'), ('__consumer_offsets', 'k', '{"n": 3}'),
		('billing.invoice', 'k', '{"n": 4}'), ('orders', 'k', '{"n": 5}')`)
	b.waitStatus(t, "SENT", 3, 30*time.Second)
	b.waitStatus(t, "FAILED", 2, 30*time.Second)
	rows, err := b.pool.Query(context.Background(), `SELECT e.topic, d.failure_reason, d.last_error
		FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id WHERE d.status = 'FAILED' ORDER BY e.topic`)
	if err != nil {
		t.Fatal(err)
	}
	type failed struct{ topic, reason, lastError string }
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (f failed, err error) {
		err = r.Scan(&f.topic, &f.reason, &f.lastError)
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []failed{
		{"__consumer_offsets", "TOPIC_NOT_ALLOWED", `topic "__consumer_offsets" is a Kafka internal topic`},
		{"audit", "TOPIC_NOT_ALLOWED", `topic "audit" is not allowed: --topics allows orders, billing.*`},
	}
	for i, w := range want {
		if i >= len(got) || got[i].topic != w.topic || got[i].reason != w.reason || !strings.Contains(got[i].lastError, w.lastError) {
			t.Errorf("FAILED rows %+v, want %+v", got, want)
			break
		}
	}
	if recs := kafkatest.Consume(t, b.brokers, 0, 10*time.Second, "audit"); len(recs) != 0 {
		t.Errorf("%d records reached the topic not allowed", len(recs))
	}
	pgtest.Eventually(t, 10*time.Second, "refusals counted under one topic label", func() (bool, string) {
		m := scrape(t, srv)
		n := m[`outbox_relay_events_failed_total{reason="TOPIC_NOT_ALLOWED",topic="(refused)"}`]
		return n == 2, fmt.Sprintf("%v refused", n)
	})
}
