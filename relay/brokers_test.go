package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// A --kafka-brokers address that does not speak Kafka is answered within
// seconds by a log line saying what it answered, and /readyz says it too;
// the relay keeps retrying, since a broker may still be starting.
func TestBrokers_AnAddressThatIsNotKafkaIsNamedWithWhatItAnswered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		addr   func(t *testing.T) string
		answer string
	}{
		{"HTTP", func(t *testing.T) string { return kafkatest.NewImpostor(t, kafkatest.HTTPAnswer, true).Addr }, `HTTP ("HTTP/1.1 400 Bad Request")`},
		{"Garbage", func(t *testing.T) string {
			return kafkatest.NewImpostor(t, []byte("\x00\x00\x00\x00garbage"), false).Addr
		}, "not Kafka"},
		{"Text", func(t *testing.T) string {
			return kafkatest.NewImpostor(t, []byte("-ERR unknown command\r\n"), false).Addr
		}, `"-ERR unknown command"`},
		{"CloseWithoutAWord", func(t *testing.T) string { return kafkatest.NewImpostor(t, nil, false).Addr }, "closed the connection without answering"},
		{"Silence", func(t *testing.T) string { return kafkatest.NewImpostor(t, nil, true).Addr }, "answered nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			addr := tc.addr(t)
			core, logs := observer.New(zap.InfoLevel)
			cfg := b.config(t)
			cfg.Kafka.Brokers = []string{addr}
			cfg.Kafka.RequestTimeout = 2 * time.Second // the wait for an answer, in Silence
			cfg.Logger = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
			r, stop := b.runRelay(t, cfg)
			start := time.Now()
			pgtest.Eventually(t, 15*time.Second, "a warning naming the address and what it answered", func() (bool, string) {
				for _, e := range logs.FilterLevelExact(zap.WarnLevel).All() {
					line := fmt.Sprint(e.Message, e.ContextMap())
					if strings.Contains(line, addr+" is not a Kafka listener") && strings.Contains(line, tc.answer) &&
						strings.Contains(line, "--kafka-brokers") {
						return true, line
					}
				}
				return false, fmt.Sprintf("%d lines", logs.Len())
			})
			t.Logf("said within %s", time.Since(start).Round(time.Millisecond))
			pgtest.Eventually(t, 15*time.Second, "/readyz naming the address", func() (bool, string) {
				err := r.Ready()
				return err != nil && strings.Contains(err.Error(), addr+" is not a Kafka listener"), fmt.Sprint(err)
			})
			if err := stop(); err != nil {
				t.Fatalf("the relay stopped with %v; want it to keep retrying until stopped", err)
			}
		})
	}
}

// Settings the broker's listener proves wrong stop the relay at start with
// a setup error naming the flag, instead of retrying forever.
func TestBrokers_TLSOrSASLOnOneSideOnlyIsASetupError(t *testing.T) {
	t.Parallel()
	m := kafkatest.NewMutualTLS(t)
	cases := []struct {
		name string
		opts []kfake.Opt
		cfg  func(*relay.Config)
		want string
	}{
		{"TLSListenerWithoutTLS", []kfake.Opt{kfake.TLS(m.Broker)}, func(*relay.Config) {}, "set --kafka-tls"},
		{"PlaintextListenerWithTLS", nil, func(c *relay.Config) { c.Kafka.TLS, c.Kafka.TLSInsecureSkipVerify = true, true },
			"turn --kafka-tls off"},
		{"SASLListenerWithoutSASL", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "relay", "pw")},
			func(*relay.Config) {}, "requires SASL; set --kafka-sasl-mechanism"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.opts...)
			cfg := b.config(t)
			tc.cfg(&cfg)
			took, err := runUntilError(t, cfg, 30*time.Second)
			t.Logf("stopped after %s: %v", took.Round(time.Millisecond), err)
			if !relay.IsSetup(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want a setup error saying %q", err, tc.want)
			}
			if took > 10*time.Second {
				t.Errorf("took %s; want the mistake named within seconds", took)
			}
		})
	}
}

// One wrong address among good ones: the relay delivers through the good
// ones and says which it left out.
func TestBrokers_AnAddressThatIsNotKafkaAmongGoodOnesIsLeftOutAndNamed(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	web := kafkatest.NewImpostor(t, kafkatest.HTTPAnswer, false).Addr
	core, logs := observer.New(zap.WarnLevel)
	cfg := b.config(t)
	cfg.Kafka.Brokers = []string{web, b.brokers[0]}
	cfg.Logger = zap.New(zapcore.NewTee(core, cfg.Logger.Core()))
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{}')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	warned := logs.FilterMessageSnippet("leaving out --kafka-brokers addresses").All()
	if len(warned) != 1 || !strings.Contains(fmt.Sprint(warned[0].ContextMap()), web+" is not a Kafka listener") {
		t.Fatalf("warnings %v; want one naming %s", logs.All(), web)
	}
}
