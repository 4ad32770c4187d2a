// Command kafka-dev is a DEVELOPMENT Kafka broker for the demo and local
// experiments: an in-memory cluster (franz-go's kfake) that speaks the real
// Kafka protocol. It is not for production: use a real Kafka cluster there.
//
//	kafka-dev serve   --port 9092 --topics orders:3,payments
//	kafka-dev consume --brokers 127.0.0.1:9092 --topic orders --count 10
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

const usage = `kafka-dev: a DEVELOPMENT Kafka-protocol broker (in memory; not for production)

Usage:
  kafka-dev serve   [--port 9092] [--topics name[:partitions],...] [--data-dir DIR]
  kafka-dev consume --brokers host:port --topic NAME [--count N] [--timeout 10s]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "consume":
		err = consume(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafka-dev %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flagenv.New("serve", nil)
	var port, partitions, maxBytes int
	var topics []string
	var dataDir string
	var autoCreate bool
	fs.Int(&port, "dev-kafka-port", 9092, "port to listen on (127.0.0.1)")
	fs.List(&topics, "dev-kafka-topics", "", "topics to create, name[:partitions], comma-separated")
	fs.Int(&partitions, "dev-kafka-partitions", 3, "partitions of a topic listed without a count")
	fs.String(&dataDir, "dev-kafka-data-dir", "", "keep data in this directory across restarts (default: memory only)")
	fs.Bool(&autoCreate, "dev-kafka-auto-create", false, "create topics on first produce, like auto.create.topics.enable")
	fs.Int(&maxBytes, "dev-kafka-message-max-bytes", 1048588, "broker message.max.bytes")
	var brokerConfigs []string
	fs.List(&brokerConfigs, "dev-kafka-broker-config", "", "more broker configs, key=value, comma-separated (such as log.message.timestamp.type=LogAppendTime)")
	fs.Func("broker-config", "alias of --dev-kafka-broker-config", func(v string) error {
		brokerConfigs = append(brokerConfigs, strings.Split(v, ",")...)
		return nil
	})
	// Short aliases for the long names above.
	fs.IntVar(&port, "port", port, "alias of --dev-kafka-port")
	fs.Func("topics", "alias of --dev-kafka-topics", func(v string) error { topics = strings.Split(v, ","); return nil })
	fs.StringVar(&dataDir, "data-dir", dataDir, "alias of --dev-kafka-data-dir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	configs := map[string]string{"message.max.bytes": strconv.Itoa(maxBytes)}
	for _, kv := range brokerConfigs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--broker-config: %q is not key=value", kv)
		}
		configs[k] = v
	}
	opts := []kfake.Opt{kfake.Ports(port), kfake.BrokerConfigs(configs)}
	for _, t := range topics {
		name, n, err := topicSpec(t, partitions)
		if err != nil {
			return err
		}
		opts = append(opts, kfake.SeedTopics(int32(n), name))
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	if autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(partitions))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("starting broker: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(os.Stderr, "kafka-dev: DEVELOPMENT broker listening on %s (topics: %s); not for production\n",
		strings.Join(c.ListenAddrs(), ","), strings.Join(topics, ","))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

func topicSpec(s string, def int) (string, int, error) {
	name, count, found := strings.Cut(strings.TrimSpace(s), ":")
	if name == "" {
		return "", 0, fmt.Errorf("--topics: empty topic name in %q", s)
	}
	if !found {
		return name, def, nil
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("--topics: %q: partitions must be a positive number", s)
	}
	return name, n, nil
}

// record is how consume prints a message: one JSON object per line.
type record struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       *string           `json:"key"`
	Value     string            `json:"value"`
	Headers   map[string]string `json:"headers"`
	Timestamp time.Time         `json:"timestamp"`
}

func consume(args []string) error {
	fs := flagenv.New("consume", nil)
	var brokers []string
	var topic string
	var count int
	var timeout time.Duration
	fs.List(&brokers, "kafka-brokers", "127.0.0.1:9092", "brokers")
	fs.Func("brokers", "alias of --kafka-brokers", func(v string) error { brokers = strings.Split(v, ","); return nil })
	fs.StringVar(&topic, "topic", "", "topic to read from the start")
	fs.IntVar(&count, "count", 0, "stop after this many records (0: until --timeout)")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if topic == "" {
		return errors.New("--topic is required")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	enc := json.NewEncoder(os.Stdout)
	seen := 0
	for count == 0 || seen < count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return fmt.Errorf("fetching %s: %w", topic, errs[0].Err)
		}
		for _, r := range fetches.Records() {
			rec := record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value),
				Headers: map[string]string{}, Timestamp: r.Timestamp}
			if r.Key != nil {
				k := string(r.Key)
				rec.Key = &k
			}
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			seen++
		}
	}
	if count > 0 && seen < count {
		return fmt.Errorf("read %d of %d records from %s before the %s timeout", seen, count, topic, timeout)
	}
	return nil
}
