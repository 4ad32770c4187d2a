package kafka

import (
	"fmt"
	"strings"

	"github.com/IBM/sarama"
)

// Partitioners for keyed events; events without a key are spread over the
// partitions either way.
const (
	// PartitionerMurmur2 places a key where the Java client, Kafka Streams
	// and most connectors do: toPositive(murmur2(key)) % partitions.
	PartitionerMurmur2 = "murmur2"
	// PartitionerFNV1a is sarama's default hash, outbox-relay's placement
	// before murmur2 became the default.
	PartitionerFNV1a = "fnv1a"

	PartitionerDefault = PartitionerMurmur2
)

// partitioner returns sarama's partitioner for a --kafka-partitioner name,
// which honours a partition a mapped table places (placing).
func partitioner(name string) (sarama.PartitionerConstructor, error) {
	var byKey sarama.PartitionerConstructor
	switch strings.ToLower(name) {
	case PartitionerMurmur2:
		byKey = sarama.NewMurmur2Partitioner
	case PartitionerFNV1a:
		byKey = sarama.NewHashPartitioner
	default:
		return nil, fmt.Errorf("--kafka-partitioner: %q is not murmur2 or fnv1a", name)
	}
	return func(topic string) sarama.Partitioner { return placing{byKey(topic)} }, nil
}

// placing puts a message whose mapped table placed its partition (Debezium's
// partition placement) there, and every other where the key says.
type placing struct{ sarama.Partitioner }

func placed(m *sarama.ProducerMessage) (int32, bool) {
	msg, ok := m.Metadata.(*Message)
	if !ok || msg.partition < 0 {
		return 0, false
	}
	return msg.partition, true
}

func (p placing) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if part, ok := placed(m); ok {
		if part >= n {
			return 0, fmt.Errorf("%w: the event is placed on partition %d, and topic %s has %d partitions",
				errNoSuchPartition, part, m.Topic, n)
		}
		return part, nil
	}
	return p.Partitioner.Partition(m, n)
}

// MessageRequiresConsistency: a placed partition is fixed; others are as
// the key's partitioner says.
func (p placing) MessageRequiresConsistency(m *sarama.ProducerMessage) bool {
	if _, ok := placed(m); ok {
		return true
	}
	if d, ok := p.Partitioner.(sarama.DynamicConsistencyPartitioner); ok {
		return d.MessageRequiresConsistency(m)
	}
	return p.Partitioner.RequiresConsistency()
}
