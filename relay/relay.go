// Package relay publishes outbox events to Kafka and records each outcome in
// outbox.deliveries, confirming the replication slot only past transactions
// whose events all have a durable status row.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/retry"
)

// Relay modes.
const (
	ModeStream = "stream"
	ModePoll   = "poll"
)

// Defaults for Config.
const (
	BatchSizeDefault        = 1000
	MaxInFlightDefault      = 10000
	MaxInFlightBytesDefault = 16 << 20
	ShutdownTimeoutDefault  = 30 * time.Second
	StatusLingerDefault     = 10 * time.Millisecond
)

// Config configures a Relay.
type Config struct {
	DatabaseURL string
	Slot        string
	Publication string
	// StatusInterval is how often the slot position is confirmed.
	StatusInterval time.Duration
	// BatchSize caps the events per Kafka hand-off and per status statement.
	BatchSize int
	// StatusLinger is how long finished events may wait for others to share
	// their status statement. It delays neither Kafka nor anything a user
	// sees, only when memory is freed and the slot may move. -1 means 0.
	StatusLinger time.Duration
	// MaxInFlight and MaxInFlightBytes cap events read from the slot that have
	// no status row yet; they bound memory whatever the transaction size.
	MaxInFlight      int
	MaxInFlightBytes int
	// ShutdownTimeout bounds the graceful drain after the context ends.
	ShutdownTimeout time.Duration
	Kafka           KafkaConfig
	// Mode is ModeStream (the stream, plus the poller for retries and gaps)
	// or ModePoll (the poller alone: a classic polling relay).
	Mode string
	// Poll configures the poller.
	Poll PollerConfig
	// Retry is the policy given to events whose status row this relay creates.
	Retry retry.Policy
	// Rand draws retry jitter; seeded from the clock when nil.
	Rand   *rand.Rand
	Logger *zap.Logger
}

func (c Config) withDefaults() Config {
	c.Slot = cmp.Or(c.Slot, cdc.SlotDefault)
	c.Publication = cmp.Or(c.Publication, cdc.PublicationDefault)
	c.StatusInterval = cmp.Or(c.StatusInterval, cdc.StatusIntervalDefault)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, MaxInFlightDefault)
	c.MaxInFlightBytes = cmp.Or(c.MaxInFlightBytes, MaxInFlightBytesDefault)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, ShutdownTimeoutDefault)
	c.StatusLinger = max(cmp.Or(c.StatusLinger, StatusLingerDefault), 0)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Retry = c.Retry.WithDefaults()
	c.Mode = cmp.Or(c.Mode, ModeStream)
	if c.Mode == ModePoll && c.Poll.GapGrace == 0 {
		c.Poll.GapGrace = -1 // polling alone: the sweep is the delivery path
	}
	c.Poll = c.Poll.withDefaults()
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	}
	return c
}

// Validate reports the first setting that cannot work, naming its flag.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DatabaseURL == "":
		return errors.New("--database-url is required (or OUTBOX_DATABASE_URL)")
	case c.BatchSize < 1:
		return errors.New("--batch-size must be at least 1")
	case c.MaxInFlight < c.BatchSize:
		return fmt.Errorf("--max-in-flight (%d) must be at least --batch-size (%d)", c.MaxInFlight, c.BatchSize)
	case c.MaxInFlightBytes < 1<<20:
		return errors.New("--max-in-flight-bytes must be at least 1 MiB")
	case !slotName.MatchString(c.Slot):
		return fmt.Errorf("--slot: %q is not a valid slot name (lowercase letters, digits and underscores, at most 63)", c.Slot)
	case c.StatusInterval < 10*time.Millisecond:
		return errors.New("--status-interval must be at least 10ms")
	case c.StatusLinger >= c.StatusInterval:
		return fmt.Errorf("--status-linger (%s) must be shorter than --status-interval (%s)", c.StatusLinger, c.StatusInterval)
	}
	if c.Mode != ModeStream && c.Mode != ModePoll {
		return fmt.Errorf("--mode: %q is not stream or poll", c.Mode)
	}
	if err := c.Poll.validate(); err != nil {
		return err
	}
	if err := c.Retry.Validate(); err != nil {
		return err
	}
	if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
		return fmt.Errorf("--database-url: %w", err)
	}
	_, err := c.Kafka.Sarama()
	return err
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Relay streams outbox inserts to Kafka.
type Relay struct {
	cfg  Config
	log  *zap.Logger
	pool *pgxpool.Pool
	// statusPool writes stream status rows with synchronous_commit off; the
	// stream waits for the WAL flush itself before it confirms the slot.
	statusPool *pgxpool.Pool
	pub        *Publisher

	kafkaClient sarama.Client // metadata lookups for the publisher

	rndMu sync.Mutex // guards cfg.Rand
}

// policyFor is the retry policy of an event, with its own max attempts if
// it set one.
func (r *Relay) policyFor(maxAttempts int32) retry.Policy {
	p := r.cfg.Retry
	if maxAttempts > 0 {
		p.MaxAttempts = int(maxAttempts)
	}
	return p
}

// storedPolicy reads the policy fixed in a status row; rows without one (an
// operator's resend of an event that had none) get this relay's.
func (r *Relay) storedPolicy(stored []byte, maxAttempts int32) retry.Policy {
	p, err := retry.ParsePolicy(stored, r.cfg.Retry)
	if err != nil {
		r.log.Warn("unreadable retry_policy in a status row; using the configured policy", zap.Error(err))
		p = r.cfg.Retry
	}
	if maxAttempts > 0 {
		p.MaxAttempts = int(maxAttempts)
	}
	return p
}

// settle turns a failed attempt (PENDING, attempts already counted) into its
// next try, or into FAILED with RETRIES_EXHAUSTED when attempts are used up.
// prev is the wait before this attempt.
func (r *Relay) settle(res *result, p retry.Policy, prev time.Duration) {
	if res.status != StatusPending {
		return
	}
	if p.Exhausted(int(res.attempts)) {
		res.status, res.reason = StatusFailed, ReasonRetriesExhausted
		return
	}
	r.rndMu.Lock()
	res.delay = p.Next(int(res.attempts), prev, r.cfg.Rand)
	r.rndMu.Unlock()
}

// New checks cfg and opens the connection pool; it does not connect yet.
func New(cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	// The outbox tables swing from empty to millions of rows and back faster
	// than autovacuum re-analyzes them. A generic plan made while
	// outbox.deliveries looked empty scans it whole for every batch (a
	// 200,000-event backlog took 54 s instead of 8), so the relay's own
	// queries are planned for the table as it is at each execution. Status
	// inserts (sc) have a plan whose shape cannot change (insertStatusSQL).
	sc := pc.Copy()
	if _, set := pc.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	sc.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	sc.ConnConfig.RuntimeParams["enable_seqscan"] = "off" // see insertStatusSQL
	sc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	statusPool, err := pgxpool.NewWithConfig(context.Background(), sc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	return &Relay{cfg: cfg, log: cfg.Logger, pool: pool, statusPool: statusPool}, nil
}

// Run relays until ctx ends, then drains what is in flight, records its
// statuses, confirms the slot and returns nil. Lost connections to
// PostgreSQL or Kafka are retried with backoff; configuration problems that
// retrying cannot fix are returned.
func (r *Relay) Run(ctx context.Context) error {
	defer r.pool.Close()
	defer r.statusPool.Close()
	if err := r.connectKafka(ctx); err != nil {
		return err
	}
	if r.pub == nil {
		return nil // ctx ended while Kafka was down
	}
	defer func() {
		if err := r.pub.Close(); err != nil {
			r.log.Warn("closing kafka producer", zap.Error(err))
		}
		_ = r.kafkaClient.Close()
	}()

	slot := r.cfg.Slot
	if r.cfg.Mode == ModePoll {
		slot = ""
	}
	pollerDone := make(chan struct{})
	go func() {
		defer close(pollerDone)
		newPoller(r, slot).run(ctx)
	}()
	defer func() { <-pollerDone }()
	if r.cfg.Mode == ModePoll {
		r.log.Info("polling (no replication stream)", zap.String("instance", r.cfg.Poll.InstanceID))
		<-ctx.Done()
		return nil
	}

	bo := retry.Outage(500*time.Millisecond, 30*time.Second)
	pg := newOutage(r.log, "postgres replication stream")
	for {
		err := r.session(ctx, pg)
		if ctx.Err() != nil {
			return err
		}
		if errors.Is(err, cdc.ErrSetup) || errors.Is(err, ErrBadTable) {
			return err
		}
		if err == nil {
			bo.Reset()
			continue
		}
		pg.failed(err)
		if !sleep(ctx, bo.NextBackOff()) {
			return nil
		}
	}
}

// connectKafka creates the producer, waiting for the cluster if it is down.
func (r *Relay) connectKafka(ctx context.Context) error {
	sc, err := r.cfg.Kafka.Sarama()
	if err != nil {
		return err
	}
	bo := retry.Outage(500*time.Millisecond, 30*time.Second)
	o := newOutage(r.log, "kafka")
	// One client for metadata lookups lives as long as the relay; producers
	// come and go with outages.
	var client sarama.Client
	connect := func() (sarama.AsyncProducer, error) { return sarama.NewAsyncProducer(r.cfg.Kafka.Brokers, sc) }
	for {
		var err error
		if client == nil {
			client, err = sarama.NewClient(r.cfg.Kafka.Brokers, sc)
		}
		var producer sarama.AsyncProducer
		if err == nil {
			producer, err = connect()
		}
		if err == nil {
			o.ok()
			r.kafkaClient = client
			r.pub = newPublisher(producer, connect, client.Partitions, retry.Outage(200*time.Millisecond, 30*time.Second), r.log)
			return nil
		}
		var cerr sarama.ConfigurationError
		if errors.As(err, &cerr) {
			return fmt.Errorf("kafka configuration: %w", err)
		}
		o.failed(err)
		if !sleep(ctx, bo.NextBackOff()) {
			return nil
		}
	}
}

// sleep waits d or until ctx ends, reporting whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outage logs a dependency going down once, and its recovery once. A
// session's stages share one, so it is safe for concurrent use.
type outage struct {
	log   *zap.Logger
	what  string
	mu    sync.Mutex
	down  bool
	since time.Time
}

func newOutage(log *zap.Logger, what string) *outage { return &outage{log: log, what: what} }

func (o *outage) failed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		o.log.Debug(o.what+" still unavailable", zap.Error(err))
		return
	}
	o.down, o.since = true, time.Now()
	o.log.Warn(o.what+" unavailable; retrying with backoff", zap.Error(err))
}

func (o *outage) ok() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		o.down = false
		o.log.Info(o.what+" recovered", zap.Duration("outage", time.Since(o.since).Round(time.Millisecond)))
	}
}

// retryDB runs op until it succeeds or ctx ends, backing off in between.
func retryDB(ctx context.Context, o *outage, op func(context.Context) error) error {
	bo := retry.Outage(100*time.Millisecond, 10*time.Second)
	for {
		err := op(ctx)
		if err == nil {
			o.ok()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.failed(err)
		if !sleep(ctx, bo.NextBackOff()) {
			return ctx.Err()
		}
	}
}
