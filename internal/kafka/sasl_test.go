package kafka_test

import (
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
)

func TestPlainWithoutTLS_IsSASLPlainOverPlaintextOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  kafka.Config
		want bool
	}{
		{kafka.Config{SASLMechanism: "PLAIN"}, true},
		{kafka.Config{SASLMechanism: "plain"}, true},
		{kafka.Config{SASLMechanism: "PLAIN", TLS: true}, false},
		{kafka.Config{SASLMechanism: "PLAIN", TLSCAFile: "/ca.pem"}, false},
		{kafka.Config{SASLMechanism: "SCRAM-SHA-512"}, false},
		{kafka.Config{}, false},
	} {
		if got := tc.cfg.PlainWithoutTLS(); got != tc.want {
			t.Errorf("%+v: PlainWithoutTLS() = %v, want %v", tc.cfg, got, tc.want)
		}
	}
}
