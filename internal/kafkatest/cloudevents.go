package kafkatest

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	"github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CloudEvent reads r as a consumer of the CloudEvents Kafka protocol
// binding does, through the CloudEvents Go SDK's sarama binding, and fails
// the test unless it is a valid CloudEvent.
func CloudEvent(t testing.TB, r *kgo.Record) *event.Event {
	t.Helper()
	cm := &sarama.ConsumerMessage{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
		Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		cm.Headers = append(cm.Headers, &sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	ev, err := binding.ToEvent(context.Background(), kafka_sarama.NewMessageFromConsumerMessage(cm))
	if err != nil {
		t.Fatalf("the CloudEvents SDK cannot read the record as a CloudEvent: %v (headers %v)", err, r.Headers)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("not a valid CloudEvent: %v", err)
	}
	return ev
}
