package kafka

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
	"github.com/xdg-go/scram"
)

// noSaramaMetrics turns off sarama's metrics (go-metrics meters and
// histograms updated on every request), which the relay does not expose;
// sarama documents the switch as process-wide.
var noSaramaMetrics = sync.OnceFunc(func() { metrics.UseNilMetrics = true })

// Defaults for Config.
const (
	VersionDefault         = "2.8.0"
	ClientIDDefault        = "outbox-relay"
	MaxMessageBytesDefault = 1000000
	CompressionDefault     = "none"
	MetadataRetriesDefault = 3
	DialTimeoutDefault     = 10 * time.Second
	RequestTimeoutDefault  = 10 * time.Second
)

// Config is how the relay reaches the cluster.
type Config struct {
	Brokers []string
	// Version is the lowest Kafka protocol version the cluster speaks (2.8.0 or newer).
	Version  string
	ClientID string
	// MaxMessageBytes is the client-side message size limit; larger events
	// fail with MESSAGE_TOO_LARGE before reaching the broker.
	MaxMessageBytes int
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string
	// Linger is how long the producer waits to fill a batch (0: send as soon
	// as the previous request to that broker is answered).
	Linger time.Duration
	// MetadataRetries bounds metadata refreshes per lookup (a missing topic
	// costs this many round trips before it fails).
	MetadataRetries int
	DialTimeout     time.Duration
	// RequestTimeout bounds a produce request (the broker's ack wait too).
	RequestTimeout time.Duration

	// Partitioner places keyed events: murmur2 (the Java client's, the
	// default) or fnv1a (sarama's).
	Partitioner string

	// SASLMechanism is empty (no SASL), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string

	// TLS turns TLS on; a CA file or a client certificate implies it.
	TLS                   bool
	TLSCAFile             string
	TLSInsecureSkipVerify bool
	// TLSCertFile and TLSKeyFile are the client's certificate and key (PEM)
	// for brokers that require mutual TLS; both or neither.
	TLSCertFile string
	TLSKeyFile  string

	// Topics is the allowlist of topics (--topics): names and patterns.
	// Empty: every topic but Kafka's internal ones.
	Topics []string
	// DeadLetterTopic (--dead-letter-topic) takes dead letters whatever
	// Topics say, and events only when Topics names it.
	DeadLetterTopic string
}

func (k Config) withDefaults() Config {
	k.Version = cmp.Or(k.Version, VersionDefault)
	k.ClientID = cmp.Or(k.ClientID, ClientIDDefault)
	k.MaxMessageBytes = cmp.Or(k.MaxMessageBytes, MaxMessageBytesDefault)
	k.Compression = cmp.Or(k.Compression, CompressionDefault)
	k.MetadataRetries = cmp.Or(k.MetadataRetries, MetadataRetriesDefault)
	k.DialTimeout = cmp.Or(k.DialTimeout, DialTimeoutDefault)
	k.RequestTimeout = cmp.Or(k.RequestTimeout, RequestTimeoutDefault)
	k.Partitioner = cmp.Or(k.Partitioner, PartitionerDefault)
	return k
}

// Sarama builds the producer configuration: idempotent, acks=all, one
// request in flight per broker so that retries cannot reorder, asynchronous
// and batched. Errors name the flag to fix.
func (k Config) Sarama() (*sarama.Config, error) {
	k = k.withDefaults()
	if len(k.Brokers) == 0 {
		return nil, errors.New("--kafka-brokers: at least one broker address is required (host:port)")
	}
	for _, b := range k.Brokers {
		if !strings.Contains(b, ":") {
			return nil, fmt.Errorf("--kafka-brokers: %q is not host:port", b)
		}
	}
	if _, err := NewAllowlist(k.Topics); err != nil {
		return nil, err
	}
	noSaramaMetrics()
	c := sarama.NewConfig()
	v, err := sarama.ParseKafkaVersion(k.Version)
	if err != nil {
		return nil, fmt.Errorf("--kafka-version: %w", err)
	}
	if !v.IsAtLeast(sarama.V2_8_0_0) {
		return nil, fmt.Errorf("--kafka-version: %s is older than 2.8.0, which the relay needs", k.Version)
	}
	c.Version = v
	c.ClientID = k.ClientID
	if k.MaxMessageBytes < 1 {
		return nil, errors.New("--kafka-max-message-bytes must be positive")
	}
	k.producer(c)
	if c.Producer.Partitioner, err = partitioner(k.Partitioner); err != nil {
		return nil, err
	}
	if c.Producer.Compression, err = compression(k.Compression); err != nil {
		return nil, err
	}
	if err := k.sasl(c); err != nil {
		return nil, err
	}
	if c.Net.TLS.Config, err = k.tls(); err != nil {
		return nil, err
	}
	c.Net.TLS.Enable = c.Net.TLS.Config != nil
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kafka configuration: %w", err)
	}
	return c, nil
}

// producer sets the producer, metadata and network settings.
func (k Config) producer(c *sarama.Config) {
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Timeout = k.RequestTimeout
	c.Producer.Flush.Frequency = k.Linger
	c.Producer.MaxMessageBytes = k.MaxMessageBytes
	c.ChannelBufferSize = 1024
	c.Metadata.Full = false
	c.Metadata.Retry.Max = k.MetadataRetries
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Net.DialTimeout = k.DialTimeout
	c.Net.ReadTimeout = k.RequestTimeout + 5*time.Second
	c.Net.WriteTimeout = k.RequestTimeout
}

// sasl sets up SASL authentication, if a mechanism is configured.
func (k Config) sasl(c *sarama.Config) error {
	mech := strings.ToUpper(k.SASLMechanism)
	switch mech {
	case "":
		return nil
	case sarama.SASLTypePlaintext:
	case sarama.SASLTypeSCRAMSHA256:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case sarama.SASLTypeSCRAMSHA512:
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	default:
		return fmt.Errorf("--kafka-sasl-mechanism: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.SASLMechanism)
	}
	if k.SASLUser == "" {
		return fmt.Errorf("--kafka-sasl-user is required with --kafka-sasl-mechanism=%s", mech)
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
	c.Net.SASL.User = k.SASLUser
	c.Net.SASL.Password = k.SASLPassword
	c.Net.SASL.Handshake = true
	return nil
}

// UsesTLS reports whether the relay connects over TLS.
func (k Config) UsesTLS() bool { return k.TLS || k.TLSCAFile != "" || k.TLSCertFile != "" }

// PlainWithoutTLS reports whether the SASL password crosses the network as
// it is: SASL PLAIN sends it, and without TLS nothing hides it.
func (k Config) PlainWithoutTLS() bool {
	return strings.EqualFold(k.SASLMechanism, sarama.SASLTypePlaintext) && !k.UsesTLS()
}

// tls returns the TLS configuration, or nil when TLS is off.
func (k Config) tls() (*tls.Config, error) {
	if !k.UsesTLS() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: k.TLSInsecureSkipVerify} //nolint:gosec // operator's explicit choice
	if k.TLSCAFile != "" {
		pem, err := os.ReadFile(k.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--kafka-tls-ca-file: no PEM certificate in %s", k.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if (k.TLSCertFile == "") != (k.TLSKeyFile == "") {
		return nil, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together: give both for mutual TLS, or neither")
	}
	if k.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(k.TLSCertFile, k.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-cert-file, --kafka-tls-key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func compression(name string) (sarama.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("--kafka-compression: %q is not one of none, gzip, snappy, lz4, zstd", name)
}
