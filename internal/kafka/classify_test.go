package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("producing: %w", err) }
	cases := []struct {
		name   string
		err    error
		class  failureClass
		reason string
	}{
		{"MissingTopic", sarama.ErrUnknownTopicOrPartition, classMessage, ReasonInvalidTopic},
		{"InvalidTopicName", wrap(sarama.ErrInvalidTopic), classMessage, ReasonInvalidTopic},
		{"TopicACL", sarama.ErrTopicAuthorizationFailed, classMessage, ReasonUnauthorizedOnTopic},
		{"BrokerSizeLimit", sarama.ErrMessageSizeTooLarge, classMessage, ReasonMessageTooLarge},
		{"ClientSizeCheck", sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes: 2 > 1"), classMessage, ReasonMessageTooLarge},
		{"NoBrokers", wrap(sarama.ErrOutOfBrokers), classUnavailable, ""},
		{"SaramaBreakerOpen", breaker.ErrBreakerOpen, classUnavailable, ""},
		{"NotEnoughReplicas", sarama.ErrNotEnoughReplicas, classUnavailable, ""},
		{"NoLeader", sarama.ErrLeaderNotAvailable, classUnavailable, ""},
		{"Timeout", sarama.ErrRequestTimedOut, classUnavailable, ""},
		{"ConnectionRefused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, classUnavailable, ""},
		{"EOF", io.EOF, classUnavailable, ""},
		{"EncodingError", wrap(sarama.PacketEncodingError{Info: "invalid timestamp"}), classMessage, ReasonInvalidEvent},
		{"BrokerRefusedTimestamp", sarama.ErrInvalidTimestamp, classMessage, ReasonInvalidEvent},
		{"BrokerRefusedRecord", sarama.ErrInvalidRecord, classMessage, ReasonInvalidEvent},
		{"CorruptMessage", sarama.ErrInvalidMessage, classOther, ""},
		{"Unknown", errors.New("something new"), classOther, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			class, reason := classify(tc.err)
			if class != tc.class || reason != tc.reason {
				t.Fatalf("classify(%v) = %d %q, want %d %q", tc.err, class, reason, tc.class, tc.reason)
			}
		})
	}
}
