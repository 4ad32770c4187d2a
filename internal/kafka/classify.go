package kafka

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
)

// Failure reasons for messages Kafka can never take as they are; they are
// written to outbox.deliveries.failure_reason.
const (
	ReasonInvalidTopic        = "INVALID_TOPIC"
	ReasonUnauthorizedOnTopic = "UNAUTHORIZED_ON_TOPIC"
	ReasonMessageTooLarge     = "MESSAGE_TOO_LARGE"
	// ReasonInvalidPartition: a mapped table placed the event on a
	// partition its topic does not have.
	ReasonInvalidPartition = "INVALID_PARTITION"
	// ReasonInvalidEvent: the record cannot be encoded, or the broker
	// refused its timestamp or its form; no retry changes that.
	ReasonInvalidEvent = "INVALID_EVENT"
)

// errNoSuchPartition: the partition a mapped table placed an event on does
// not exist.
var errNoSuchPartition = errors.New("no such partition")

// failureClass says what a publish error means for the message.
type failureClass int

const (
	// classUnavailable: the cluster is down or slow. Not the event's fault:
	// no status change, no attempt counted; the relay pauses and resends.
	classUnavailable failureClass = iota + 1
	// classMessage: this message can never be delivered as it is. FAILED at
	// once with a reason; an operator fixes the cause and resends.
	classMessage
	// classOther: anything else; the poller retries it with backoff.
	classOther
)

// classify sorts a sarama producer error, returning the failure_reason for
// message-specific failures.
func classify(err error) (failureClass, string) {
	switch {
	case errors.Is(err, sarama.ErrUnknownTopicOrPartition), errors.Is(err, sarama.ErrInvalidTopic):
		return classMessage, ReasonInvalidTopic
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		return classMessage, ReasonUnauthorizedOnTopic
	case errors.Is(err, sarama.ErrMessageSizeTooLarge), errors.Is(err, sarama.ErrMessageSetSizeTooLarge),
		isClientSizeCheck(err):
		return classMessage, ReasonMessageTooLarge
	case errors.Is(err, errNoSuchPartition):
		return classMessage, ReasonInvalidPartition
	case errors.Is(err, sarama.ErrInvalidTimestamp), errors.Is(err, sarama.ErrInvalidRecord), isEncoding(err):
		return classMessage, ReasonInvalidEvent
	}
	for _, t := range unavailable {
		if errors.Is(err, t) {
			return classUnavailable, ""
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return classUnavailable, ""
	}
	return classOther, ""
}

// unavailable lists the errors that mean "the cluster, not the message".
var unavailable = []error{
	sarama.ErrOutOfBrokers, sarama.ErrNotConnected, sarama.ErrClosedClient, sarama.ErrShuttingDown,
	sarama.ErrBrokerNotAvailable, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition,
	sarama.ErrRequestTimedOut, sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend,
	sarama.ErrNetworkException, sarama.ErrKafkaStorageError, sarama.ErrIncompleteResponse,
	sarama.ErrNotController, sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch,
	sarama.ErrOffsetNotAvailable, sarama.ErrThrottlingQuotaExceeded, sarama.ErrConsumerCoordinatorNotAvailable,
	sarama.ErrProducerRetryBufferOverflow,
	breaker.ErrBreakerOpen, // sarama's own per-topic/partition breaker after failed lookups
}

// isClientSizeCheck recognises sarama's own Producer.MaxMessageBytes check.
func isClientSizeCheck(err error) bool {
	var ce sarama.ConfigurationError
	return errors.As(err, &ce) && strings.Contains(string(ce), "MaxMessageBytes")
}

// isEncoding reports whether err is the client's failure to encode a
// record: the same record fails the same way every time.
func isEncoding(err error) bool {
	var pe sarama.PacketEncodingError
	var ppe *sarama.PacketEncodingError
	return errors.As(err, &pe) || errors.As(err, &ppe)
}
