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

// partitioner returns sarama's partitioner for a --kafka-partitioner name.
func partitioner(name string) (sarama.PartitionerConstructor, error) {
	switch strings.ToLower(name) {
	case PartitionerMurmur2:
		return sarama.NewMurmur2Partitioner, nil
	case PartitionerFNV1a:
		return sarama.NewHashPartitioner, nil
	}
	return nil, fmt.Errorf("--kafka-partitioner: %q is not murmur2 or fnv1a", name)
}
