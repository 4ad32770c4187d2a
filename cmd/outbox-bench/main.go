// Command outbox-bench measures outbox-relay against the decoding limit and a
// polling relay in one run: drain throughput, COMMIT-to-Kafka latency, the
// writer's rate with and without the relay, and the relay's memory and CPU.
// scripts/bench.sh starts PostgreSQL and the development broker and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	dbURL, brokers, relayBin, topic, outDir string
	trace                                   string
	events, big, conns, drainRuns, purge    int
	stallDrains, backfill, brokerPID        int
	consoleRuns, consoleIncident            int
	consoleOnly                             bool
	growth                                  string
	growthFailed                            float64
	growthInterleaved                       time.Duration
	growthVersusEmpty                       time.Duration
	relayArgs, relayEnv                     []string
	rates                                   string
	steady, warmup                          time.Duration
}

// Result is one row of the table.
type Result struct {
	Phase      string  `json:"phase"`
	Events     int     `json:"events"`
	Seconds    float64 `json:"seconds"`
	EventsPerS float64 `json:"events_per_s"`
	VsDecode   float64 `json:"vs_decode_limit,omitempty"`
	P50ms      float64 `json:"p50_ms,omitempty"`
	P95ms      float64 `json:"p95_ms,omitempty"`
	P99ms      float64 `json:"p99_ms,omitempty"`
	MaxMs      float64 `json:"max_ms,omitempty"`
	RSSMiB     float64 `json:"relay_peak_rss_mib,omitempty"`
	CPUSeconds float64 `json:"relay_cpu_s,omitempty"`
	// CPUPerEvent is the relay's CPU per event in µs: over the measured
	// window in the steady phases, over the whole run in the others.
	CPUPerEvent float64 `json:"relay_cpu_us_per_event,omitempty"`
	// BrokerCPU is the development broker's CPU seconds over the same span:
	// not the relay's cost (a real Kafka runs elsewhere), but taken from the
	// same two cores.
	BrokerCPU  float64   `json:"broker_cpu_s,omitempty"`
	VsDrain    float64   `json:"vs_relay_drain,omitempty"` // backfill: its rate over the relay drain's
	WriterRate float64   `json:"writer_rate,omitempty"`
	TargetRate int       `json:"target_rate,omitempty"`
	RunsPerS   []float64 `json:"runs_events_per_s,omitempty"` // every run's rate; the row is their median
	Late       int       `json:"late,omitempty"`              // steady events not at the consumer a minute after the writer stopped
	// DeletedMeasured: events retention deleted in a run's measured window
	// (streamWhileRetaining).
	DeletedMeasured int    `json:"deleted_while_measured,omitempty"`
	Description     string `json:"description"`

	latencies []time.Duration // a steady run's, sorted: the growth phase pools its runs'
	// timed: a steady run's events in the order they were due, when (at a
	// fixed rate, when each was due to be written; else when its COMMIT
	// returned) and its latency (the interleaved runs split them by time),
	// and measureFrom, when its measuring began.
	timed       []timedLatency
	measureFrom time.Time
}

func main() {
	if rate := os.Getenv(wakeEnv); rate != "" {
		if err := wakeChild(rate); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.dbURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (a database the bench may wipe)")
	flag.StringVar(&o.brokers, "kafka-brokers", "127.0.0.1:9092", "development broker")
	flag.StringVar(&o.relayBin, "relay", "outbox-relay", "outbox-relay binary")
	flag.StringVar(&o.topic, "topic", "bench", "topic with three partitions")
	flag.StringVar(&o.outDir, "out", "bench-results", "where results.json and latency.svg go")
	flag.IntVar(&o.events, "events", 200000, "events for the drain phases")
	flag.IntVar(&o.drainRuns, "drain-runs", 3, "how many times to run the three drain phases; each row reports the median run")
	flag.IntVar(&o.stallDrains, "stall-drains", 0, "only repeat the relay's drain of --events this many times and count the drains in which the stream went silent (a stall the watchdog ended); 0 runs the normal phases")
	flag.IntVar(&o.consoleRuns, "console-runs", 20, "after the backfill, requests of each operator console page on its status rows, timed (0 skips the phase)")
	flag.IntVar(&o.consoleIncident, "console-incident", 1000000, "status rows of the console incident phase: a quarter FAILED, 8,000 held keys; pages timed before and right after skipping 80% of the FAILED (0 skips the phase)")
	flag.Float64Var(&o.growthFailed, "growth-failed", 1, "the growth phase's share of FAILED status rows, in percent (0: none)")
	flag.DurationVar(&o.growthInterleaved, "growth-interleaved", 4*time.Minute, "with --growth, one more stream run at 1,000/s per size, this long, in which the bench deletes old SENT events with retention's own statement at retention's keep-up pace (100 every 80 ms, as the relay's retention keeps up with 1,000/s) in every other 10 s block, and compares the stream's p99 in the blocks with deletes and without (0 skips it)")
	flag.DurationVar(&o.growthVersusEmpty, "growth-versus-empty", 4*time.Minute, "with --growth, one more stream run at 1,000/s per size, this long, with a second relay on an empty database of the same server, the writer writing every other 10 s block there, and compares the stream's p50/p99 in the blocks written to the filled database and to the empty one (0 skips it)")
	flag.BoolVar(&o.consoleOnly, "console-only", false, "run only the console incident phase (no relay, no broker)")
	flag.StringVar(&o.growth, "growth", "", "run only the growth phase: for each of these sizes (status rows, such as 0,5000000,20000000), fill outbox.deliveries and the events behind it as a week of traffic leaves them and measure the relay and the database (minutes a size; empty: the normal phases)")
	flag.IntVar(&o.backfill, "backfill-events", 1000000, "events written before the relay's first start, which it delivers through its backfill (0 skips the phase)")
	flag.IntVar(&o.brokerPID, "broker-pid", 0, "the development broker's process id, to report its CPU per phase (0: not reported)")
	flag.IntVar(&o.big, "big-transaction", 1000000, "rows in the one-transaction memory phase (0 skips it)")
	flag.IntVar(&o.purge, "purge-events", 1000000, "old SENT events that retention deletes during a stream at 1,000/s (0 skips the phase)")
	flag.IntVar(&o.conns, "writers", 8, "writer connections in the steady phases")
	flag.StringVar(&o.rates, "rates", "1000,5000,max", "steady-state writer rates (events/s)")
	flag.DurationVar(&o.steady, "steady-duration", 10*time.Second, "length of each steady-state run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "how long each steady-state run writes before it measures (connections, caches and the relay settle); those events are relayed but not counted")
	flag.Func("relay-arg", "an extra argument for every relay started (repeatable), such as --debug-addr=127.0.0.1:6060",
		func(v string) error { o.relayArgs = append(o.relayArgs, v); return nil })
	flag.Func("relay-env", "a KEY=VALUE variable for every relay started (repeatable), such as GODEBUG=schedtrace=2147483647 (see docs/performance.md)",
		func(v string) error {
			if !strings.Contains(v, "=") {
				return fmt.Errorf("%q is not KEY=VALUE", v)
			}
			o.relayEnv = append(o.relayEnv, v)
			return nil
		})
	flag.StringVar(&o.trace, "latency-trace", "", "write each steady phase's latencies as CSV (µs since measuring began, µs to the consumer) to files with this prefix, and with --growth what the server did every 50 ms of each stream run with and without retention (not the one during the first sweep) (time, WAL bytes, each busy process and its wait) to PREFIX-activity-N.csv")
	chartFrom := flag.String("chart-from", "", "only redraw latency.svg (in --out) from this results.json")
	flag.Parse()
	if *chartFrom != "" {
		if err := redraw(*chartFrom, o.outDir); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	o        options
	pool     *pgxpool.Pool
	res      []Result
	growth   []Growth // the growth phase's rows
	traced   int      // latency traces written
	activity int      // activity samples written (retention runs with --latency-trace)
	// serverVersion is the server's server_version_num.
	serverVersion int
	// relayLog, when set, receives the relays' stderr instead of os.Stderr.
	relayLog io.Writer
	// atMeasure, when set, is called as a steady run's measured window
	// begins (the end of its warm-up).
	atMeasure func()
	// alternate, when set, is a second database's URL: a steady run at a
	// fixed rate writes its blocks off there (streamVersusEmpty).
	alternate string
}

func run(ctx context.Context, o options) error {
	pool, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	b := &bench{o: o, pool: pool}
	if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
		return fmt.Errorf("the database needs the outbox schema (outbox-relay migrate): %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&b.serverVersion); err != nil {
		return fmt.Errorf("reading the server's version: %w", err)
	}
	if o.stallDrains > 0 {
		return b.stallDrains(ctx, o.stallDrains)
	}
	if o.growth != "" {
		if err := b.growthPhase(ctx); err != nil {
			return err
		}
		b.printGrowth()
		return b.writeResults()
	}
	if o.consoleOnly {
		if err := b.incidentPhase(ctx); err != nil {
			return err
		}
		b.print()
		return b.writeResults()
	}
	if err := b.drains(ctx); err != nil {
		return err
	}
	if o.backfill > 0 {
		if err := b.backfillPhase(ctx); err != nil {
			return err
		}
	}
	if err := b.steadyStates(ctx); err != nil {
		return err
	}
	if o.purge > 0 {
		if err := b.purgeSteady(ctx); err != nil {
			return err
		}
	}
	if o.big > 0 {
		if err := b.bigTransaction(ctx); err != nil {
			return err
		}
	}
	if o.consoleRuns > 0 && o.consoleIncident > 0 {
		if err := b.incidentPhase(ctx); err != nil {
			return err
		}
	}
	b.print()
	return b.writeResults()
}

func (b *bench) exec(ctx context.Context, sql string, args ...any) error {
	_, err := b.pool.Exec(ctx, sql, args...)
	return err
}

func (b *bench) lsn(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := b.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}

func (b *bench) dropSlot(ctx context.Context, name string) {
	_ = b.exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
}

// insertEvents commits n events of about 500 bytes, perTxn rows per
// transaction, keys spread over 1,000 values.
func (b *bench) insertEvents(ctx context.Context, n, perTxn int) error {
	for done := 0; done < n; done += perTxn {
		k := min(perTxn, n-done)
		err := b.exec(ctx, `INSERT INTO outbox.events (topic, key, payload, event_type)
			SELECT $1, 'customer-' || ((s + $2) % 1000),
			       jsonb_build_object('order_id', s + $2, 'customer', 'customer-' || ((s + $2) % 1000),
			                          'amount', round((random() * 1000)::numeric, 2), 'currency', 'EUR',
			                          'note', repeat('x', 380)),
			       'order.created'
			FROM generate_series(1, $3) AS s`, b.o.topic, done, k)
		if err != nil {
			return fmt.Errorf("inserting events: %w", err)
		}
	}
	return nil
}

// trimTopic deletes every record of the bench topic, as a real broker's
// retention would: the development broker keeps records in memory, and
// gigabytes of earlier phases would slow it (its garbage collector) in the
// next.
func (b *bench) trimTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.o.brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, b.o.topic)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	res, err := adm.DeleteRecords(ctx, ends.Offsets())
	if err != nil {
		return fmt.Errorf("deleting records: %w", err)
	}
	return res.Error()
}
