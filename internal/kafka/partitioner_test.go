package kafka

import (
	"math"
	"testing"

	"github.com/IBM/sarama"
)

// javaVectors are the key-to-murmur2 cases of Kafka's own test suite
// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
// testMurmur2), as the Java client's signed int.
var javaVectors = []struct {
	key  []byte
	hash int32
}{
	{[]byte("21"), -973932308},
	{[]byte("foobar"), -790332482},
	{[]byte("a-little-bit-long-string"), -985981536},
	{[]byte("a-little-bit-longer-string"), -1486304829},
	{[]byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
	{[]byte{'a', 'b', 'c'}, 479470107},
}

func TestPartitioner_Murmur2PlacesKeysAsTheJavaClientDoes(t *testing.T) {
	t.Parallel()
	newP, err := partitioner(PartitionerMurmur2)
	if err != nil {
		t.Fatal(err)
	}
	p := newP("orders")
	for _, v := range javaVectors {
		// With MaxInt32 partitions the partition is the whole positive hash:
		// toPositive(murmur2(key)) % n, toPositive(h) = h & 0x7fffffff.
		for _, n := range []int32{math.MaxInt32, 1, 3, 7, 12, 100} {
			want := (v.hash & 0x7fffffff) % n
			got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(v.key)}, n)
			if err != nil || got != want {
				t.Errorf("key %q over %d partitions: partition %d (%v), want %d", v.key, n, got, err, want)
			}
		}
	}
	if p.(sarama.DynamicConsistencyPartitioner).MessageRequiresConsistency(&sarama.ProducerMessage{}) {
		t.Error("an event without a key must not be pinned to a partition")
	}
}

func TestPartitioner_UnknownNamesAreRefusedNamingTheFlag(t *testing.T) {
	t.Parallel()
	if _, err := (Config{Brokers: []string{"127.0.0.1:9092"}, Partitioner: "crc32"}).Sarama(); err == nil ||
		err.Error() != `--kafka-partitioner: "crc32" is not murmur2 or fnv1a` {
		t.Fatalf("err = %v", err)
	}
	for _, name := range []string{"", "murmur2", "fnv1a", "MURMUR2"} {
		if _, err := (Config{Brokers: []string{"127.0.0.1:9092"}, Partitioner: name}).Sarama(); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}
