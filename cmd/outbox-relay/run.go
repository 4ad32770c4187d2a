package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/redact"
	"github.com/outbox-relay/outbox-relay/relay"
	"github.com/outbox-relay/outbox-relay/retry"
)

// zeroDefault ends the help of a knob whose 0 means its default.
const zeroDefault = "; 0: the default"

// kafkaFlags defines run's Kafka flags into k.
func kafkaFlags(fs *flagenv.Set, k *relay.KafkaConfig) {
	fs.List(&k.Brokers, "kafka-brokers", "", "Kafka bootstrap brokers, comma-separated host:port")
	fs.List(&k.Topics, "topics", "", "the topics the relay may publish to, comma-separated names and patterns (orders,billing.*); "+
		"an event for another is FAILED TOPIC_NOT_ALLOWED. Empty: every topic except system ones (Kafka's __*, the ecosystem's _*, "+
		"Kafka Connect's connect-configs, connect-offsets and connect-status), which must be named exactly, as must the dead-letter topic for events")
	fs.String(&k.DeadLetterTopic, "dead-letter-topic", "", "also publish every event that ends FAILED here, once per failure, with its key, value and headers and outbox-dlt-* headers saying why (the status row stays the truth); dead letters go there whatever --topics says, events only when --topics names it; off when empty")
	fs.String(&k.Version, "kafka-version", kafka.VersionDefault, "Kafka protocol version the cluster speaks (2.8.0 or newer)")
	fs.String(&k.ClientID, "kafka-client-id", kafka.ClientIDDefault, "Kafka client id")
	fs.Int(&k.MaxMessageBytes, "kafka-max-message-bytes", kafka.MaxMessageBytesDefault, "largest message the relay sends; larger events fail with MESSAGE_TOO_LARGE"+zeroDefault)
	fs.String(&k.Compression, "kafka-compression", kafka.CompressionDefault, "none, gzip, snappy, lz4 or zstd")
	fs.Duration(&k.Linger, "kafka-linger", 0, "how long the producer waits to fill a batch; 0: it sends at once")
	fs.Int(&k.MetadataRetries, "kafka-metadata-retries", kafka.MetadataRetriesDefault, "metadata refresh attempts per lookup"+zeroDefault)
	fs.Duration(&k.DialTimeout, "kafka-dial-timeout", kafka.DialTimeoutDefault, "broker connection timeout"+zeroDefault)
	fs.Duration(&k.RequestTimeout, "kafka-request-timeout", kafka.RequestTimeoutDefault, "produce request timeout"+zeroDefault)
	fs.String(&k.Partitioner, "kafka-partitioner", kafka.PartitionerDefault, "partition of a keyed event: murmur2 (the Java client's, Kafka Streams') or fnv1a (sarama's; outbox-relay's placement before murmur2)")
	fs.String(&k.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: empty (none), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.String(&k.SASLUser, "kafka-sasl-user", "", "SASL user")
	fs.Secret(&k.SASLPassword, "kafka-sasl-password", "", "SASL password (prefer --kafka-sasl-password-file)")
	fs.Bool(&k.TLS, "kafka-tls", false, "connect to Kafka over TLS")
	fs.String(&k.TLSCAFile, "kafka-tls-ca-file", "", "PEM file of CAs to trust for Kafka TLS (implies --kafka-tls)")
	fs.Bool(&k.TLSInsecureSkipVerify, "kafka-tls-insecure-skip-verify", false, "do not verify the broker's certificate")
	fs.String(&k.TLSCertFile, "kafka-tls-cert-file", "", "PEM client certificate for mutual TLS (with --kafka-tls-key-file; implies --kafka-tls)")
	fs.String(&k.TLSKeyFile, "kafka-tls-key-file", "", "PEM private key of --kafka-tls-cert-file")
}

// runFlags parses the run subcommand's flags and environment into a Config.
func runFlags(args []string, stdout, stderr io.Writer, getenv func(string) string) (relay.Config, runOpts, error) {
	fs := flagenv.New("outbox-relay run", getenv)
	fs.Describe("", "", "Stream outbox.events inserts from a logical replication slot to Kafka and record each delivery in\n"+
		"outbox.deliveries; a poller retries failures, takes back rows of relays that died, and delivers what the\n"+
		"stream missed. Runs until SIGTERM or SIGINT (a second signal exits at once).")
	var c relay.Config
	k := &c.Kafka
	var o runOpts
	fs.SecretURL(&c.DatabaseURL, "database-url", "", "PostgreSQL URL (the role needs REPLICATION)")
	fs.Required("kafka-brokers")
	fs.RequiredUnless("database-url", "debezium-config")
	fs.String(&c.Slot, "slot", cdc.SlotDefault, "logical replication slot, created if missing")
	fs.String(&c.Publication, "publication", cdc.PublicationDefault, "publication of outbox.events (and the mapped tables), created if missing")
	fs.String(&o.tablesConfig, "tables-config", "", "JSON file mapping your own outbox tables (docs/own-table.md); outbox.events is always relayed")
	fs.String(&o.debeziumConfig, "debezium-config", "", "a Debezium outbox connector's configuration (its JSON or .properties): relay its tables as Debezium would; its database.* settings stand in for --database-url")
	fs.Bool(&o.debeziumOpenTelemetry, "debezium-opentelemetry", false, "with --debezium-config, pass each event's tracing.span.context.field column (tracingspancontext) on as traceparent and tracestate headers, as a Kafka Connect worker with OpenTelemetry propagates it; off, as Debezium without OpenTelemetry, the column is not read")
	fs.String(&o.debeziumWorkerConfig, "debezium-worker-config", "", "the Kafka Connect worker's properties file: its key.converter, value.converter and header.converter (with their settings) apply where the --debezium-config names none, as in Kafka Connect")
	fs.Duration(&c.StatusInterval, "status-interval", cdc.StatusIntervalDefault, "how often the slot's confirmed position is reported"+zeroDefault)
	fs.Duration(&c.ReplicationTimeout, "replication-timeout", relay.ReplicationTimeoutDefault, "when nothing arrives on the replication connection for this long (a reply is asked for after a quarter of it), reconnect; also the TCP user timeout of every PostgreSQL connection, and how long /readyz tolerates a silent or stalled stream"+zeroDefault)
	fs.Duration(&c.StatementTimeout, "statement-timeout", relay.StatementTimeoutDefault, "longest any one statement of the relay may take; one that runs out is retried on a fresh connection"+zeroDefault)
	fs.Duration(&c.StatusLinger, "status-linger", relay.StatusLingerDefault, "how long delivered events wait for others to share one status statement (Kafka is not delayed; 0: none)")
	fs.Int(&c.BatchSize, "batch-size", relay.BatchSizeDefault, "events per Kafka hand-off and per status statement"+zeroDefault)
	fs.Int(&c.MaxInFlight, "max-in-flight", relay.MaxInFlightDefault, "events read from the slot without a status row yet, at most"+zeroDefault)
	fs.Int(&c.MaxInFlightBytes, "max-in-flight-bytes", relay.MaxInFlightBytesDefault, "bytes of such events, at most"+zeroDefault)
	fs.Duration(&c.ShutdownTimeout, "shutdown-timeout", relay.ShutdownTimeoutDefault, "how long a graceful stop may take to drain"+zeroDefault)
	kafkaFlags(fs, k)
	fs.String(&c.Mode, "mode", relay.ModeStream, "stream (replication stream, plus the poller for retries and gaps) or poll (the poller alone)")
	fs.Bool(&c.SlotFailover, "slot-failover", false, "create the slot with FAILOVER so that it survives a failover to a standby (PostgreSQL 17 and newer)")
	fs.String(&c.OnInvalidSlot, "on-invalid-slot", relay.InvalidSlotRecreate, "when PostgreSQL invalidates the slot: recreate (drop it, create it again and backfill) or exit (code 2, for a person to decide)")
	pc := &c.Poll
	fs.Duration(&pc.Interval, "poll-interval", relay.PollIntervalDefault, "poller: wait between polls when idle"+zeroDefault)
	fs.Int(&pc.BatchSize, "poll-batch-size", relay.PollBatchSizeDefault, "poller: rows per claim, recovery or sweep statement"+zeroDefault)
	fs.Duration(&pc.StuckThreshold, "stuck-threshold", relay.StuckThresholdDefault, "poller: PROCESSING rows locked longer than this are taken back (an attempt)"+zeroDefault)
	fs.Duration(&pc.GapGrace, "gap-grace", 0, "poller: events without a status row older than this are delivered by the gap sweep (default 5m with --mode=stream, 0 with --mode=poll)")
	fs.Duration(&pc.GapRecheck, "gap-recheck", relay.GapRecheckDefault, "poller: when longer than --gap-grace (poll mode), a second sweep pass trails this far behind, for events whose created_at is older than their commit"+zeroDefault)
	fs.Duration(&pc.GapLookback, "gap-lookback", relay.GapLookbackDefault, "poller: how far back the first gap sweep after start looks"+zeroDefault)
	fs.String(&pc.InstanceID, "instance-id", "", "poller: name written to locked_by (default host-pid)")
	rp := &c.Retry
	fs.String(&rp.Kind, "retry-policy", retry.KindDefault, "exponential or fixed")
	fs.Duration(&rp.Delay, "retry-delay", retry.DelayDefault, "wait after the first failed attempt (exponential) or each one (fixed)"+zeroDefault)
	fs.Duration(&rp.MaxDelay, "retry-max-delay", retry.MaxDelayDefault, "longest exponential wait"+zeroDefault)
	fs.Int(&rp.MaxAttempts, "retry-max-attempts", retry.MaxAttemptsDefault, "failed attempts before FAILED with RETRIES_EXHAUSTED (an event may set max_attempts)"+zeroDefault)
	fs.String(&rp.Jitter, "retry-jitter", retry.JitterDefault, "none, proportional (±10%), full or decorrelated")
	fs.String(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.String(&o.logFormat, "log-format", "json", "json or console")
	fs.Int(&o.maxProcs, "max-procs", 0, "OS threads running Go code at once (GOMAXPROCS); 0: Go's default, every CPU the process may use")
	fs.Int(&o.gcPercent, "gc-percent", gcPercentDefault, "heap growth, in percent of the live heap, that starts a garbage collection (GOGC; a GOGC variable in the environment is kept unless this is set otherwise); higher spends less CPU on collection and more memory")
	fs.String(&o.debugAddr, "debug-addr", "", "serve Go pprof profiles (not the command line) on this loopback address, such as 127.0.0.1:6060; off when empty")
	fs.Bool(&o.debugAllowRemote, "debug-addr-allow-remote", false, "let --debug-addr listen on an address other than loopback and answer any Host")
	fs.String(&o.metricsAddr, "metrics-addr", metricsAddrDefault, "serve /metrics (Prometheus), /healthz and /readyz on this address; off when empty")
	fs.Int(&o.metricsMaxTopics, "metrics-max-topics", metrics.MaxTopicsDefault, "topics counted under their own topic label (the first this many the relay sends to); events of others count as topic=\""+
		metrics.TopicOther+"\", events never sent to a topic without one as topic=\""+metrics.TopicRefused+"\""+zeroDefault)
	consoleFlags(fs, &o)
	fs.Duration(&c.SpillAfter, "spill-after", relay.SpillAfterDefault, "once Kafka has been unavailable this long, queue events as PENDING rows instead of holding them (so PostgreSQL can recycle WAL); 0 never spills")
	fs.String(&c.FailedKeyPolicy, "failed-key-policy", relay.FailedKeyContinue, "continue (a FAILED or retrying event lets later events of its key go out) or hold (they queue behind it until it is SENT or SKIPPED)")
	var ceMode string
	fs.String(&ceMode, "cloudevents", "", "write every record as a CloudEvent (the CloudEvents Kafka binding): binary (ce_ headers, the value as it is) or structured (application/cloudevents+json); empty: plain records")
	fs.String(&c.CloudEvents.Source, "cloudevents-source", "", "every CloudEvent's source; empty: /DATABASE/SCHEMA.TABLE (a mapped table may set its own)")
	fs.String(&c.CloudEvents.DefaultType, "cloudevents-default-type", "", "the CloudEvents type of an event without an event type; empty: such an event is FAILED INVALID_EVENT")
	fs.Duration(&c.Retention, "retention", relay.RetentionDefault, "delete SENT events older than this with their delivery rows (one relay at a time); 0 keeps everything")
	fs.Duration(&c.HistoryRetention, "history-retention", relay.HistoryRetentionDefault, "delete the per-minute counts of the console's History (outbox.delivery_minutes) older than this; at least 1h"+zeroDefault)
	if err := parse(fs, args, stdout, stderr); err != nil {
		return c, o, err
	}
	c.CloudEvents.Mode = cloudevents.Mode(ceMode)
	// A 0 turns these off (keep everything, never spill, no linger), which
	// relay.Config spells as a negative value: its 0 means the default.
	for _, d := range []*time.Duration{&c.Retention, &c.SpillAfter, &c.StatusLinger} {
		if *d == 0 {
			*d = -1
		}
	}
	return c, o, nil
}

// metricsAddrDefault is in the 9100-9999 range Prometheus allocates to
// exporters, on no common exporter's port.
const metricsAddrDefault = ":9677"

// runOpts are the run flags that are not relay configuration.
type runOpts struct {
	logLevel, logFormat, debugAddr, metricsAddr string
	tablesConfig, debeziumConfig                string
	debeziumWorkerConfig                        string
	maxProcs, gcPercent, metricsMaxTopics       int
	debugAllowRemote, debeziumOpenTelemetry     bool
	// console: the operator console run serves (off without an address),
	// through consoleDB (--database-url when empty).
	console   console.Config
	consoleDB string
}

// gcPercentDefault is Go's. 400 saves CPU (relay drain 7.2 → 6.0 µs of CPU
// per event) but about doubles the peak RSS, past the memory
// targets (docs/performance.md): a choice for the operator.
const gcPercentDefault = 100

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	cfg, o, err := runFlags(args, stdout, stderr, getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(o.logLevel, o.logFormat, stderr)
	if err != nil {
		return flagenv.Usage(err)
	}
	defer log.Sync() //nolint:errcheck // best effort on exit
	// Signals are ours from here on: one during the start is a stop too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer stopOnSignal(log, cancel)()
	cfg.Logger = log
	if err := loadTables(&cfg, o, log); err != nil {
		return err
	}
	// The console shows held keys only when keys can be held.
	o.console.FailedKeyPolicy = cfg.FailedKeyPolicy
	if err := checkRun(cfg, o); err != nil {
		return err
	}
	if err := tuneRuntime(o, getenv); err != nil {
		return err
	}
	logStart(log, cfg)

	if o.debugAddr != "" {
		stop, err := serve(log, "--debug-addr", "Go pprof profiles", o.debugAddr, debugHandler(o.debugAllowRemote))
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg.Metrics = metrics.New(version)
	cfg.Metrics.LimitTopics(o.metricsMaxTopics)
	r, err := relay.New(cfg)
	if err != nil {
		return err
	}
	if o.metricsAddr != "" {
		stop, err := serve(log, "--metrics-addr", "/metrics, /healthz and /readyz", o.metricsAddr, cfg.Metrics.Handler(r))
		if err != nil {
			r.Close()
			return err
		}
		defer stop()
	}
	if o.console.Listen != "" {
		stop, err := serveConsole(ctx, log, o, cfg.DatabaseURL)
		if err != nil {
			r.Close()
			return err
		}
		defer stop()
	}
	if err := runUntilStopped(ctx, r, cfg.ShutdownTimeout+stopGrace); err != nil {
		log.Error("stopping", zap.Error(err), zap.Bool("setup_problem", relay.IsSetup(err)))
		return err
	}
	log.Info("stopped")
	return nil
}

// checkRun checks run's configuration before anything starts: each
// error names the flag to fix (exit 64).
func checkRun(cfg relay.Config, o runOpts) error {
	if err := cfg.Validate(); err != nil {
		return flagenv.Usage(err)
	}
	if o.console.Listen != "" {
		if err := o.console.Validate(); err != nil {
			return flagenv.Usage(err) // names run's --console-* flag
		}
	}
	if o.consoleDB != "" {
		if err := checkDatabaseURL("--console-database-url", o.consoleDB); err != nil {
			return err
		}
	}
	if o.debugAddr != "" {
		return checkDebugAddr(o.debugAddr, o.debugAllowRemote)
	}
	return nil
}

// logStart logs the configuration a relay starts with, secrets left out,
// and warns of a password sent in clear text.
func logStart(log *zap.Logger, cfg relay.Config) {
	log.Info("starting outbox-relay",
		zap.String("version", version),
		zap.String("database_url", redact.URL(cfg.DatabaseURL)),
		zap.Strings("kafka_brokers", cfg.Kafka.Brokers), zap.Strings("topics", cfg.Kafka.Topics),
		zap.String("cloudevents", string(cfg.CloudEvents.Mode)), zap.String("dead_letter_topic", cfg.Kafka.DeadLetterTopic),
		zap.String("mode", cfg.Mode), zap.String("slot", cfg.Slot), zap.String("publication", cfg.Publication),
		zap.String("kafka_sasl_mechanism", cfg.Kafka.SASLMechanism), zap.Bool("kafka_tls", cfg.Kafka.UsesTLS()),
		zap.Bool("kafka_tls_client_cert", cfg.Kafka.TLSCertFile != ""), zap.String("kafka_partitioner", cfg.Kafka.Partitioner))
	if cfg.Kafka.PlainWithoutTLS() {
		log.Warn("--kafka-sasl-mechanism PLAIN without TLS: the SASL password crosses the network in clear text, " +
			"for anyone on the path to read; set --kafka-tls (or use SCRAM-SHA-512)")
	}
}

// stopGrace is how much longer than --shutdown-timeout a stop may take
// before the process exits without waiting for the relay any more.
const stopGrace = 500 * time.Millisecond

// errStopTimeout: the relay did not return within --shutdown-timeout of
// the stop. Exiting then loses nothing: the slot moves only past events
// with a durable status row, so what was in flight is read again.
var errStopTimeout = errors.New("the relay did not stop within --shutdown-timeout; exiting without waiting " +
	"(events in flight are read again from the slot at the next start: nothing is lost)")

// runUntilStopped runs r until it returns, or until limit has passed
// since ctx ended (a connection hanging in a dial, say): then it returns
// errStopTimeout and leaves r running for the process to end.
func runUntilStopped(ctx context.Context, r *relay.Relay, limit time.Duration) error {
	done := make(chan error, 1)
	go func() {
		err := r.Run(ctx)
		r.Close()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errStopTimeout
	}
}

// serve serves handler on addr (the value of flag) until stop is called.
func serve(log *zap.Logger, flag, what, addr string, handler http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	log.Info("serving "+what, zap.String("addr", ln.Addr().String()))
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() //nolint:errcheck // ends with Close
	return func() { _ = srv.Close() }, nil
}

// stopOnSignal cancels on the first SIGINT or SIGTERM (a graceful stop) and
// exits with 130 on the second; call the result to stop listening.
func stopOnSignal(log *zap.Logger, cancel context.CancelFunc) func() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		log.Info("signal received: finishing in-flight events, then stopping (signal again to exit now)", zap.Stringer("signal", sig))
		cancel()
		if sig, ok = <-sigs; ok {
			log.Warn("second signal: exiting now; in-flight events will be replayed", zap.Stringer("signal", sig))
			_ = log.Sync()
			os.Exit(130)
		}
	}()
	return func() { signal.Stop(sigs) }
}

func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format: %q is not json or console", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)), nil
}

// tuneRuntime applies --max-procs and --gc-percent.
func tuneRuntime(o runOpts, getenv func(string) string) error {
	switch {
	case o.maxProcs < 0:
		return flagenv.Usagef("--max-procs must not be negative")
	case o.maxProcs > 0:
		runtime.GOMAXPROCS(o.maxProcs)
	}
	switch {
	case o.gcPercent < 1:
		return flagenv.Usagef("--gc-percent must be at least 1")
	case o.gcPercent != gcPercentDefault || getenv("GOGC") == "":
		debug.SetGCPercent(o.gcPercent)
	}
	return nil
}

// consoleFlags defines run's flags of the operator console it may serve.
// The tokens and the prefix read the console command's variables.
func consoleFlags(fs *flagenv.Set, o *runOpts) {
	fs.String(&o.console.Listen, "console-addr", "", "also serve the operator console on this address (docs/operating.md: The console); off when empty")
	fs.SecretURL(&o.consoleDB, "console-database-url", "", "the console's PostgreSQL URL, for a role in outbox_operator (the relay's role "+
		"may not resend or skip); --database-url when empty")
	fs.Secret(&o.console.AdminToken, "console-admin-token", "", "the console's admin token (as console --admin-token)")
	fs.Secret(&o.console.ReadToken, "console-read-token", "", "the console's read-only token (as console --read-token)")
	fs.String(&o.console.Prefix, "console-path-prefix", "", "the console's path behind a reverse proxy (as console --path-prefix)")
	consoleServingFlags(fs, "console-", &o.console)
}

// serveConsole serves the operator console as run's --console-addr asks.
func serveConsole(ctx context.Context, log *zap.Logger, o runOpts, dbURL string) (stop func(), err error) {
	if o.consoleDB != "" {
		dbURL = o.consoleDB
	}
	o.console.Logger = log.Named("console")
	c, closeDB, err := openConsole(ctx, "--console-database-url", dbURL, o.console)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.console.Listen)
	if err != nil {
		closeDB()
		return nil, fmt.Errorf("--console-addr: %w", err)
	}
	log.Info("serving the operator console", zap.String("addr", ln.Addr().String()), zap.Bool("tls", c.TLS()))
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Serve(ctx, ln); err != nil {
			log.Error("serving the operator console", zap.Error(err))
		}
	}()
	return func() { cancel(); <-done; closeDB() }, nil
}
