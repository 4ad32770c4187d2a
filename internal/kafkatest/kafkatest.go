// Package kafkatest runs an in-memory Kafka-protocol broker (kfake) for tests
// and reads back what the relay wrote.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster starts a one-broker cluster on loopback, closed when the test ends.
// Topics are not auto-created unless an option says so.
func Cluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Consume reads topics from the start until it has at least n records and
// has reached every partition's end as it was when the read began (so
// duplicates cannot hide a missing record), or until timeout passes. It
// returns what it read.
func Consume(t testing.TB, brokers []string, n int, timeout time.Duration, topics ...string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topics...)
	adm.Close()
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	remaining := map[string]map[int32]int64{} // partitions still short of their end
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			if remaining[o.Topic] == nil {
				remaining[o.Topic] = map[int32]int64{}
			}
			remaining[o.Topic][o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	short := func() bool {
		for _, ps := range remaining {
			if len(ps) > 0 {
				return true
			}
		}
		return false
	}
	for (len(out) < n || short()) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if end, ok := remaining[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining[r.Topic], r.Partition)
			}
		})
	}
	return out
}
