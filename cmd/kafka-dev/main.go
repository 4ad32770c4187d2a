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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

const usage = `kafka-dev: a DEVELOPMENT Kafka-protocol broker (in memory; not for production)

Usage:
  kafka-dev serve          [--port 9092] [--topics name[:partitions],...] [--data-dir DIR] [--auto-create]
  kafka-dev topics create  [--brokers host:port] --topic NAME [--partitions N]
  kafka-dev consume        [--brokers host:port] --topic NAME [--count N] [--timeout 10s]

Run 'kafka-dev <command> --help' for a command's flags. Exit codes: 0 done,
1 error, 64 usage error.
`

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flagenv.ExitUsage
	}
	var err error
	name := args[0]
	switch name {
	case "serve":
		err = serve(args[1:], stdout, stderr)
	case "consume":
		err = consume(args[1:], stdout, stderr)
	case "topics":
		if len(args) == 2 && strings.Contains(args[1], "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		if len(args) < 2 || args[1] != "create" {
			err = flagenv.Usagef("topics takes one command: create")
			break
		}
		name = "topics create"
		err = createTopic(args[2:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		msg := fmt.Sprintf("kafka-dev: unknown command %q", name)
		if close := flagenv.Closest(name, []string{"serve", "consume", "topics"}); close != "" {
			msg += fmt.Sprintf("; did you mean %q?", close)
		}
		fmt.Fprintf(stderr, "%s\nRun 'kafka-dev --help' for the commands.\n", msg)
		return flagenv.ExitUsage
	}
	return flagenv.Report(stderr, "kafka-dev", name, err, nil)
}

// parse parses args, writing help to stdout for --help.
func parse(fs *flagenv.Set, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.Help(stdout)
	}
	return err
}

func serve(args []string, stdout, stderr io.Writer) error {
	fs := flagenv.New("kafka-dev serve", nil)
	fs.Describe("", "", "Serve an in-memory Kafka-protocol broker on 127.0.0.1 until SIGTERM or SIGINT. DEVELOPMENT only.")
	var port, partitions, maxBytes int
	var topics []string
	var dataDir string
	var autoCreate bool
	fs.Int(&port, "dev-kafka-port", 9092, "port to listen on (127.0.0.1)")
	fs.List(&topics, "dev-kafka-topics", "", "topics to create, name[:partitions], comma-separated")
	fs.Int(&partitions, "dev-kafka-partitions", 3, "partitions of a topic listed without a count")
	fs.String(&dataDir, "dev-kafka-data-dir", "", "keep data in this directory across restarts (default: memory only)")
	fs.Bool(&autoCreate, "dev-kafka-auto-create", false, "create topics on first produce, like auto.create.topics.enable (off: a missing topic fails its event INVALID_TOPIC, as on most clusters)")
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
	fs.BoolVar(&autoCreate, "auto-create", autoCreate, "alias of --dev-kafka-auto-create")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	configs := map[string]string{"message.max.bytes": strconv.Itoa(maxBytes)}
	for _, kv := range brokerConfigs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return flagenv.Usagef("--broker-config: %q is not key=value", kv)
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
	fmt.Fprintf(stderr, "kafka-dev: DEVELOPMENT broker listening on %s (topics: %s); not for production\n",
		strings.Join(c.ListenAddrs(), ","), strings.Join(topics, ","))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

func topicSpec(s string, def int) (string, int, error) {
	name, count, found := strings.Cut(strings.TrimSpace(s), ":")
	if name == "" {
		return "", 0, flagenv.Usagef("--topics: empty topic name in %q", s)
	}
	if !found {
		return name, def, nil
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return "", 0, flagenv.Usagef("--topics: %q: partitions must be a positive number", s)
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

func consume(args []string, stdout, _ io.Writer) error {
	fs := flagenv.NewCommand("kafka-dev consume", nil)
	fs.Shared("kafka-brokers")
	fs.Describe("", "", "Print a topic's records from the start, one JSON object per line.")
	var brokers []string
	var topic string
	var count int
	var timeout time.Duration
	fs.List(&brokers, "kafka-brokers", "127.0.0.1:9092", "brokers")
	fs.Func("brokers", "alias of --kafka-brokers", func(v string) error { brokers = strings.Split(v, ","); return nil })
	fs.String(&topic, "topic", "", "topic to read from the start")
	fs.Required("topic")
	fs.Int(&count, "count", 0, "stop after this many records (0: until --timeout)")
	fs.Duration(&timeout, "timeout", 10*time.Second, "stop after this long")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	enc := json.NewEncoder(stdout)
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

// createTopic creates a topic on a running broker (CreateTopics, as any
// Kafka admin client does).
func createTopic(args []string, stdout, _ io.Writer) error {
	fs := flagenv.NewCommand("kafka-dev topics create", nil)
	fs.Shared("kafka-brokers")
	fs.Describe("", "", "Create a topic on a running broker (kafka-dev serve, or any Kafka cluster).")
	var brokers []string
	var topic string
	var partitions int
	fs.List(&brokers, "kafka-brokers", "127.0.0.1:9092", "brokers")
	fs.Func("brokers", "alias of --kafka-brokers", func(v string) error { brokers = strings.Split(v, ","); return nil })
	fs.String(&topic, "topic", "", "name of the topic to create")
	fs.Required("topic")
	fs.Int(&partitions, "partitions", 3, "partitions of the topic")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if partitions < 1 {
		return flagenv.Usagef("--partitions must be at least 1")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	fmt.Fprintf(stdout, "created topic %s with %d partitions\n", topic, partitions)
	return nil
}
