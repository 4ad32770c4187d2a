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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/migrations"
	"github.com/outbox-relay/outbox-relay/retry"
)

// KafkaConfig is how the relay reaches the cluster.
type KafkaConfig = kafka.Config

// Relay modes.
const (
	ModeStream = "stream"
	ModePoll   = "poll"
)

// What to do when PostgreSQL invalidates the slot (--on-invalid-slot).
const (
	// InvalidSlotRecreate drops the slot, creates it again and backfills.
	InvalidSlotRecreate = "recreate"
	// InvalidSlotExit stops the relay (exit code 2) for a person to decide.
	InvalidSlotExit = "exit"
)

// What an event that fails or waits for a retry does to its key
// (--failed-key-policy).
const (
	// FailedKeyContinue lets the key's later events go out (the default).
	FailedKeyContinue = "continue"
	// FailedKeyHold queues the key's later events until it is SENT (or
	// SKIPPED).
	FailedKeyHold = "hold"
)

// SpillAfterDefault is how long Kafka may be unavailable before the stream
// spills.
const SpillAfterDefault = 60 * time.Second

// standbyRetry is how often a standby relay tries to take over the slot.
const standbyRetry = time.Second

// RetentionDefault is how long SENT events are kept.
const RetentionDefault = 7 * 24 * time.Hour

// IsSetup reports whether err is a problem an operator must fix before the
// relay can run (wrong server settings, schema, slot or publication,
// credentials, Kafka settings its brokers refuse); the CLI exits with
// code 2 for it.
func IsSetup(err error) bool {
	return errors.Is(err, cdc.ErrSetup) || errors.Is(err, migrations.ErrForeignSchema) || errors.Is(err, ErrBadTable) || errors.Is(err, cdc.ErrSlotInvalid) || kafka.IsRefusal(err) ||
		errors.Is(err, pgdial.ErrLoginRefused)
}

// Defaults for Config.
const (
	BatchSizeDefault        = 1000
	MaxInFlightDefault      = 10000
	MaxInFlightBytesDefault = 16 << 20
	ShutdownTimeoutDefault  = 30 * time.Second
	StatusLingerDefault     = 10 * time.Millisecond
	// ReplicationTimeoutDefault: see Config.ReplicationTimeout.
	ReplicationTimeoutDefault = cdc.TimeoutDefault
	// StatementTimeoutDefault: see Config.StatementTimeout.
	StatementTimeoutDefault = 30 * time.Second
)

// Config configures a Relay.
type Config struct {
	DatabaseURL string
	Slot        string
	Publication string
	// Tables are mapped tables the stream relays beside outbox.events
	// (--tables-config, --debezium-config). outbox.events is always relayed.
	Tables []*mapping.Table
	// CloudEvents writes every record as a CloudEvent (--cloudevents).
	CloudEvents cloudevents.Config
	// StatusInterval is how often the slot position is confirmed.
	StatusInterval time.Duration
	// ReplicationTimeout: when nothing at all arrives on the replication
	// connection for this long (the relay asks the server for a reply once
	// it has been quiet for a quarter of it), the relay closes it and
	// streams again from the confirmed position. It is also the TCP user
	// timeout of every connection to PostgreSQL, and /readyz turns 503 when
	// the stream has been silent, or events in flight have made no
	// progress, for as long.
	ReplicationTimeout time.Duration
	// StatementTimeout bounds every statement the relay runs; one that
	// runs out is retried on a fresh connection, never counted against an
	// event.
	StatementTimeout time.Duration
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
	// SlotFailover creates the slot with FAILOVER (PostgreSQL 17 and newer)
	// so that it survives a failover to a standby.
	SlotFailover bool
	// OnInvalidSlot is InvalidSlotRecreate (the default) or InvalidSlotExit.
	OnInvalidSlot string
	// Retention: SENT events older than this are deleted with their
	// delivery rows, by one relay at a time. 0 means RetentionDefault;
	// negative keeps everything.
	Retention time.Duration
	// HistoryRetention: the counts of the console's History
	// (outbox.delivery_minutes, outbox.delivery_hours) older than this are
	// deleted. 0 means HistoryRetentionDefault; at least an hour (the
	// Topics page's last hour).
	HistoryRetention time.Duration
	// SpillAfter: once Kafka has been unavailable this long, the stream
	// keeps reading the slot and queues every event as a PENDING row
	// instead of holding it in memory, so the slot moves on and PostgreSQL
	// recycles its WAL. 0 means SpillAfterDefault; negative never spills.
	SpillAfter time.Duration
	// FailedKeyPolicy is FailedKeyContinue (the default) or FailedKeyHold.
	FailedKeyPolicy string
	// Metrics receives the relay's metrics; a private set when nil.
	Metrics *metrics.Metrics
	// Poll configures the poller.
	Poll PollerConfig
	// Retry is the policy given to events whose status row this relay creates.
	Retry retry.Policy
	// Rand draws retry jitter; seeded from the clock when nil.
	Rand *rand.Rand
	// Now is the clock of the poller and of retry settlement: nil means
	// the database's now() (and Go's clock where Go keeps time). Tests set
	// it to move through thresholds, backoff and grace periods at once.
	Now    func() time.Time
	Logger *zap.Logger
}

func (c Config) withDefaults() Config {
	c.Slot = cmp.Or(c.Slot, cdc.SlotDefault)
	c.Publication = cmp.Or(c.Publication, cdc.PublicationDefault)
	c.StatusInterval = cmp.Or(c.StatusInterval, cdc.StatusIntervalDefault)
	c.ReplicationTimeout = cmp.Or(c.ReplicationTimeout, ReplicationTimeoutDefault)
	c.StatementTimeout = cmp.Or(c.StatementTimeout, StatementTimeoutDefault)
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
	c.OnInvalidSlot = cmp.Or(c.OnInvalidSlot, InvalidSlotRecreate)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.SpillAfter = cmp.Or(c.SpillAfter, SpillAfterDefault)
	c.HistoryRetention = cmp.Or(c.HistoryRetention, HistoryRetentionDefault)
	c.FailedKeyPolicy = cmp.Or(c.FailedKeyPolicy, FailedKeyContinue)
	if c.Metrics == nil {
		c.Metrics = metrics.New("")
	}
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
	case c.CloudEvents.Validate() != nil:
		return c.CloudEvents.Validate()
	case c.Kafka.DeadLetterTopic != "" && kafka.CheckTopicName(c.Kafka.DeadLetterTopic) != nil:
		return fmt.Errorf("--dead-letter-topic %q: %s", c.Kafka.DeadLetterTopic, kafka.TopicNameRule)
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
	case c.ReplicationTimeout < time.Second || c.ReplicationTimeout < 4*c.StatusInterval:
		return fmt.Errorf("--replication-timeout (%s) must be at least 1s and at least four times --status-interval (%s)",
			c.ReplicationTimeout, c.StatusInterval)
	case c.StatementTimeout < 100*time.Millisecond:
		return fmt.Errorf("--statement-timeout (%s) must be at least 100ms", c.StatementTimeout)
	}
	if c.Mode != ModeStream && c.Mode != ModePoll {
		return fmt.Errorf("--mode: %q is not stream or poll", c.Mode)
	}
	if c.OnInvalidSlot != InvalidSlotRecreate && c.OnInvalidSlot != InvalidSlotExit {
		return fmt.Errorf("--on-invalid-slot: %q is not recreate or exit", c.OnInvalidSlot)
	}
	if c.FailedKeyPolicy != FailedKeyContinue && c.FailedKeyPolicy != FailedKeyHold {
		return fmt.Errorf("--failed-key-policy: %q is not continue or hold", c.FailedKeyPolicy)
	}
	if c.HistoryRetention < time.Hour {
		return fmt.Errorf("--history-retention (%s) must be at least 1h (the console's Topics page shows the last hour)", c.HistoryRetention)
	}
	if c.SpillAfter > 0 && c.SpillAfter < time.Second {
		return fmt.Errorf("--spill-after (%s) must be 0 (never) or at least 1s", c.SpillAfter)
	}
	if err := c.checkTableHeaders(); err != nil {
		return err
	}
	if err := c.Poll.validate(); err != nil {
		return err
	}
	if err := c.Retry.Validate(); err != nil {
		return err
	}
	if err := pgdial.CheckURL(c.DatabaseURL); err != nil {
		return fmt.Errorf("--database-url: %w", err) // without the URL
	}
	_, err := c.Kafka.Sarama()
	return err
}

// checkTableHeaders refuses a mapped table that places a header by a name
// the relay writes (kafka.ReservedHeader): every one of its events would
// be FAILED INVALID_EVENT.
func (c Config) checkTableHeaders() error {
	ce := c.CloudEvents.Mode != cloudevents.Off
	for _, t := range c.Tables {
		names := []string{t.IDHeader}
		for _, p := range t.Placements {
			if !p.Envelope && !p.Partition {
				names = append(names, p.Alias)
			}
		}
		for _, n := range names {
			if n == "" {
				continue
			}
			if err := kafka.ReservedHeader(n, ce); err != nil {
				return fmt.Errorf("%s: table %s places header %w", t.Origin, t.QualifiedName(), err)
			}
		}
	}
	return nil
}

// mappedFloor is how far back, from now, the paths that walk a mapped
// table look (the backfill, the gap sweep): rows older than --retention may
// have had their status rows deleted by it after they were delivered, and
// their table keeps them; a row without a status row there is not one the
// relay missed. Zero: no floor (retention off).
func (c Config) mappedFloor(now time.Time) time.Time {
	if c.Retention <= 0 {
		return time.Time{}
	}
	return now.Add(-c.Retention)
}

// mapped returns the mapped tables other than outbox.events.
func (c Config) mapped() []*mapping.Table {
	var out []*mapping.Table
	for _, t := range c.Tables {
		if !t.IsEvents() {
			out = append(out, t)
		}
	}
	return out
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Relay streams outbox inserts to Kafka.
type Relay struct {
	cfg     Config
	log     *zap.Logger
	store   *store.Store
	settle  *settler
	metrics *metrics.Metrics
	ce      *ceWriter // nil: records are not CloudEvents
	history *historyWriter

	// What the probes (Healthy, Ready) and observe read.
	role       atomic.Pointer[string]
	pub        atomic.Pointer[kafka.Publisher]
	current    atomic.Pointer[session] // the streaming session, if any
	pollerTurn atomic.Int64            // unix nanoseconds of the poller's last round
	pollerLog  *zap.Logger
	pollerDown *outage.Log   // PostgreSQL as the poller sees it
	wake       chan struct{} // wakes the poller (wakePoller)
	streamDown *outage.Log   // PostgreSQL as the replication stream sees it
	startDown  *outage.Log   // PostgreSQL as the start (checkSchema) sees it
	// reconnecting is set from a silent stream's end until the next
	// session streams: /readyz says so meanwhile.
	reconnecting atomic.Bool
	// lagging is set while a connected standby of synchronized_standby_slots
	// is behind (watchHeldBack).
	lagging atomic.Pointer[heldBack]
	// statusTime is the status statements' moving time, which paces
	// retention.
	statusTime statusLatency
	// streamDelay is how late streamed events reach Kafka, which paces
	// retention too.
	streamDelay streamDelay
}

// New checks cfg and opens the store's connection pools; it does not
// connect yet. Close releases them.
func New(cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// Not 0 (caught up) before the poller's first sweep: a scrape or a
	// wait for it could come first.
	cfg.Metrics.GapSweepBehind.Set(cfg.Poll.GapLookback.Seconds())
	st, err := store.Open(cfg.DatabaseURL, cfg.ReplicationTimeout)
	if err != nil {
		return nil, err
	}
	st = st.WithStatementTimeout(cfg.StatementTimeout)
	if cfg.Now != nil {
		st = st.WithClock(cfg.Now)
	}
	r := &Relay{cfg: cfg, log: cfg.Logger, store: st, metrics: cfg.Metrics, ce: newCEWriter(cfg.CloudEvents, cfg.DatabaseURL, cfg.Tables),
		settle:    &settler{def: cfg.Retry, log: cfg.Logger, rnd: cfg.Rand},
		pollerLog: cfg.Logger.With(zap.String("component", "poller")), wake: make(chan struct{}, 1),
		streamDown: outage.New(cfg.Logger, "postgres replication stream")}
	r.pollerDown = outage.New(r.pollerLog, "postgres (poller)")
	r.startDown = outage.New(cfg.Logger, "postgres")
	r.setRole(metrics.RoleStarting)
	cfg.Metrics.WatchProgress(r.Progress)
	cfg.Metrics.WatchReady(r.Ready)
	if cfg.Kafka.DeadLetterTopic != "" {
		cfg.Metrics.CountDeadLetters()
	}
	clock := cfg.Now
	if clock == nil {
		clock = time.Now
	}
	r.history = &historyWriter{counts: newMinutes(clock), store: st, retention: cfg.HistoryRetention, now: clock,
		log: cfg.Logger.With(zap.String("component", "history"))}
	cfg.Metrics.SendOutcomesTo(r.history.counts)
	return r, nil
}

// Close releases what New opened. Call it after Run has returned.
func (r *Relay) Close() { r.store.Close() }

// Run relays until ctx ends, then drains what is in flight, records its
// statuses, confirms the slot and returns nil. Lost connections to
// PostgreSQL or Kafka are retried with backoff; problems that retrying
// cannot fix are returned at once (IsSetup tells the setup ones).
func (r *Relay) Run(ctx context.Context) (err error) {
	if err := r.checkSchema(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	// Kafka down at start is an outage like any other: the stream starts
	// and waits for it, or spills.
	pub, err := kafka.Open(ctx, r.cfg.Kafka, r.log)
	switch {
	case ctx.Err() != nil:
		return nil // stopped while connecting
	case err != nil:
		return err
	}
	defer func() {
		if cerr := pub.Close(); cerr != nil {
			r.log.Warn("closing kafka producer", zap.Error(cerr))
		}
	}()
	pub.OnTransition(func(s kafka.BreakerState) { r.metrics.BreakerTransition(s.String()) })
	r.pub.Store(pub)

	slot := r.cfg.Slot
	if r.cfg.Mode == ModePoll {
		slot = ""
		if err := r.checkPollTables(ctx); err != nil {
			return err
		}
	}
	// The poller stops with the stream: a setup error ends the process
	// whatever the poller is doing.
	pollCtx, stopPolling := context.WithCancel(ctx)
	deps := pollerDeps{store: r.store, pub: pub, settle: r.settle, metrics: r.metrics, status: &r.statusTime, delay: &r.streamDelay,
		pgDown: r.pollerDown, log: r.pollerLog, now: r.cfg.Now,
		turned: func() { r.pollerTurn.Store(time.Now().UnixNano()) }, hold: r.hold(), wake: r.wake,
		ce: r.ce, tables: r.cfg.Tables}
	if r.cfg.Mode == ModePoll {
		deps.direct, deps.maxBytes = r.newDirect(pub, nil), r.cfg.MaxInFlightBytes/4
	}
	if mapped := r.cfg.mapped(); len(mapped) > 0 {
		deps.mapped, deps.mappedBytes = mapped, r.cfg.MaxInFlightBytes/4
		deps.mappedFloor = r.cfg.mappedFloor(time.Now())
		deps.pender = newMappedPender(r.settle, r.metrics, r.cfg.Retry.JSON(), r.ce)
	}
	p := newPoller(r.cfg.Poll, slot, deps)
	var wg sync.WaitGroup
	defer func() {
		stopPolling()
		wg.Wait()
		// What the stream's drain and the poller's last round counted.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StatementTimeout)
		defer cancel()
		r.history.flush(ctx)
	}()
	wg.Go(func() { p.run(pollCtx) })
	wg.Go(func() { r.history.run(pollCtx) })
	if r.cfg.Kafka.DeadLetterTopic != "" {
		wg.Go(func() { r.newDeadLetters(pub).run(pollCtx) })
	}
	wg.Go(func() { r.observe(pollCtx) })
	wg.Go(func() { r.watchHeldBack(pollCtx) })
	if r.cfg.Retention > 0 {
		ret := &retainer{dbURL: r.cfg.DatabaseURL, timeout: r.cfg.StatementTimeout, tcpTimeout: r.cfg.ReplicationTimeout, store: r.store, age: r.cfg.Retention, log: r.log,
			deleted: func(n int64) { r.metrics.RetentionDeleted.Add(float64(n)) },
			slot:    slot, maxLag: r.cfg.Poll.GapMaxSlotLag, status: &r.statusTime, delay: &r.streamDelay}
		wg.Go(func() { ret.run(pollCtx) })
	}
	if r.cfg.Mode == ModePoll {
		r.setRole(metrics.RolePolling)
		r.log.Info("polling (no replication stream)", zap.String("instance", r.cfg.Poll.InstanceID))
		<-ctx.Done()
		return nil
	}
	return r.stream(ctx, pub, r.streamDown)
}

// checkSchema waits for PostgreSQL and fails when the outbox schema is
// missing or older than this relay, or when the relay's role lacks a right
// of outbox_relay's.
func (r *Relay) checkSchema(ctx context.Context) error {
	var version int
	var refused error
	err := outage.Retry(ctx, r.startDown, func(ctx context.Context) error {
		var err error
		version, err = r.store.SchemaVersion(ctx)
		switch err = pgdial.Explain(err); {
		case errors.Is(err, store.ErrNoSchema):
			return nil
		case errors.Is(err, pgdial.ErrLoginRefused):
			refused = err // waiting cannot fix it
			return nil
		case err != nil && !pgdial.IsDenied(err):
			return err
		}
		rights, rerr := r.store.MissingRights(ctx, GroupRelay)
		if rerr != nil {
			return rerr
		}
		refused = RightsError(rights, GroupRelay, err)
		return nil
	})
	switch {
	case err != nil || ctx.Err() != nil:
		return nil // ctx ended while PostgreSQL was down
	case refused != nil:
		return refused
	}
	return CheckSchemaVersion(version)
}

// The group roles whose rights the relay and the operator commands need
// (migrations/roles.sql).
const (
	GroupRelay    = "outbox_relay"
	GroupOperator = "outbox_operator"
)

// maxNamed is how many missing rights a RightsError names.
const maxNamed = 5

// RightsError returns a setup error naming the grant to run when rights
// says the role lacks some of group's, or when denied (PostgreSQL's refusal
// of a statement, SQLSTATE 42501) is not nil; otherwise nil.
func RightsError(rights store.Rights, group string, denied error) error {
	user := pgx.Identifier{rights.User}.Sanitize()
	switch {
	case len(rights.Missing) > 0:
		lacks := strings.Join(rights.Missing[:min(len(rights.Missing), maxNamed)], ", ")
		if more := len(rights.Missing) - maxNamed; more > 0 {
			lacks += fmt.Sprintf(" and %d more", more)
		}
		return fmt.Errorf("%w: role %s lacks rights that %s has and its job needs: %s; run GRANT %s TO %s",
			cdc.ErrSetup, user, group, lacks, group, user)
	case denied != nil:
		return fmt.Errorf("%w: %w; run GRANT %s TO %s (with roles managed by hand: the grants of %s in "+
			"`outbox-relay migrate --print`)", cdc.ErrSetup, denied, group, user, group)
	}
	return nil
}

// CheckSchemaVersion returns a setup error unless version, the database's
// outbox schema version (0: none), is this release's.
func CheckSchemaVersion(version int) error {
	switch {
	case version == 0:
		return fmt.Errorf("%w: the outbox schema does not exist in this database; run `outbox-relay migrate` first", cdc.ErrSetup)
	case version < migrations.Latest():
		return fmt.Errorf("%w: the outbox schema is at version %d, this release needs %d; run `outbox-relay migrate` first",
			cdc.ErrSetup, version, migrations.Latest())
	}
	return nil
}

// stream runs replication sessions one after another until ctx ends or an
// error that retrying cannot fix. While another relay streams from the slot
// this one is a standby and tries to take over every standbyRetry.
func (r *Relay) stream(ctx context.Context, pub *kafka.Publisher, down *outage.Log) error {
	bo := retry.Reconnect(500*time.Millisecond, 30*time.Second)
	for {
		err := r.session(ctx, pub, down)
		var inUse *cdc.SlotInUseError
		switch {
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return nil // a stop that cut a statement short (opening the stream, say) is a stop
		case ctx.Err() != nil:
			return err
		case err == nil:
			bo.Reset()
			continue
		case errors.Is(err, cdc.ErrSlotInvalid):
			if err := r.invalidSlot(ctx, err); err != nil {
				return err
			}
			continue
		case IsSetup(err):
			return err
		case errors.Is(err, cdc.ErrSilent):
			// session logged it and ended the old walsender: stream again now.
			bo.Reset()
			if !outage.Sleep(ctx, bo.NextBackOff()) {
				return nil
			}
			continue
		case errors.Is(err, cdc.ErrWalSendersFull):
			r.log.Warn("postgres refused the replication connection: max_wal_senders connections are open "+
				"(an old connection of this relay may still be going away); retrying. Raise max_wal_senders if other clients use them all",
				zap.String("slot", r.cfg.Slot), zap.Error(err))
		case errors.As(err, &inUse):
			if role := r.role.Load(); role == nil || *role != metrics.RoleStandby { // once per spell as a standby
				r.log.Info("standby: "+inUse.Error()+"; taking over when it is free",
					zap.String("slot", inUse.Slot), zap.Int("pid", inUse.PID), zap.Duration("retry", standbyRetry))
			}
			r.setRole(metrics.RoleStandby)
			if !r.waitForSlot(ctx) {
				return nil
			}
			continue
		}
		down.Failed(err)
		if !outage.Sleep(ctx, bo.NextBackOff()) {
			return nil
		}
	}
}

// waitForSlot waits, looking every standbyRetry, until no process streams
// from the slot, and reports whether ctx is still alive. It costs one
// query on the pool a look, not a replication connection.
func (r *Relay) waitForSlot(ctx context.Context) bool {
	for outage.Sleep(ctx, standbyRetry) {
		if pid, err := r.store.SlotHolder(ctx, r.cfg.Slot); err == nil && pid == 0 {
			return true
		}
	}
	return false
}

// invalidSlot handles a slot the server invalidated: with
// InvalidSlotRecreate it is dropped (the next session creates it and
// backfills), with InvalidSlotExit the error is returned.
func (r *Relay) invalidSlot(ctx context.Context, invalid error) error {
	r.log.Error("replication slot invalidated: PostgreSQL removed WAL the slot still needed, so the slot can never stream again",
		zap.String("slot", r.cfg.Slot), zap.Error(invalid), zap.String("on_invalid_slot", r.cfg.OnInvalidSlot))
	if r.cfg.OnInvalidSlot == InvalidSlotExit {
		return fmt.Errorf("%w; with --on-invalid-slot=exit the relay stops: drop the slot "+
			"(SELECT pg_drop_replication_slot('%s')) and start it again, or run with --on-invalid-slot=recreate, "+
			"to create the slot again and backfill", invalid, r.cfg.Slot)
	}
	if _, err := cdc.DropSlot(ctx, r.cfg.DatabaseURL, r.cfg.Slot, r.cfg.ReplicationTimeout); err != nil {
		return fmt.Errorf("dropping invalidated slot %q: %w", r.cfg.Slot, err)
	}
	r.log.Warn("dropped the invalidated slot; creating it again and backfilling", zap.String("slot", r.cfg.Slot))
	return nil
}

func pubState(p *kafka.Publisher) string {
	if p == nil {
		return "not connected"
	}
	return p.State().String()
}
