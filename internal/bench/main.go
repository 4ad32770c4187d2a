// Command bench measures outbox-relay against the decoding limit and a
// polling relay in one run: drain throughput, COMMIT-to-Kafka latency, the
// writer's rate with and without the relay, and the relay's memory and CPU.
// scripts/bench.sh starts PostgreSQL and the development broker and runs it.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	dbURL, brokers, relayBin, topic, outDir string
	trace                                   string
	events, big, conns, drainRuns           int
	relayArgs                               []string
	rates                                   string
	steady, warmup                          time.Duration
}

// Result is one row of the table.
type Result struct {
	Phase       string    `json:"phase"`
	Events      int       `json:"events"`
	Seconds     float64   `json:"seconds"`
	EventsPerS  float64   `json:"events_per_s"`
	VsDecode    float64   `json:"vs_decode_limit,omitempty"`
	P50ms       float64   `json:"p50_ms,omitempty"`
	P95ms       float64   `json:"p95_ms,omitempty"`
	P99ms       float64   `json:"p99_ms,omitempty"`
	MaxMs       float64   `json:"max_ms,omitempty"`
	RSSMiB      float64   `json:"relay_peak_rss_mib,omitempty"`
	CPUSeconds  float64   `json:"relay_cpu_s,omitempty"`
	WriterRate  float64   `json:"writer_rate,omitempty"`
	TargetRate  int       `json:"target_rate,omitempty"`
	RunsPerS    []float64 `json:"runs_events_per_s,omitempty"` // every run's rate; the row is their median
	Description string    `json:"description"`
}

func main() {
	var o options
	flag.StringVar(&o.dbURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (a database the bench may wipe)")
	flag.StringVar(&o.brokers, "kafka-brokers", "127.0.0.1:9092", "development broker")
	flag.StringVar(&o.relayBin, "relay", "outbox-relay", "outbox-relay binary")
	flag.StringVar(&o.topic, "topic", "bench", "topic with three partitions")
	flag.StringVar(&o.outDir, "out", "bench-results", "where results.json and latency.svg go")
	flag.IntVar(&o.events, "events", 200000, "events for the drain phases")
	flag.IntVar(&o.drainRuns, "drain-runs", 3, "how many times to run the three drain phases; each row reports the median run")
	flag.IntVar(&o.big, "big-transaction", 1000000, "rows in the one-transaction memory phase (0 skips it)")
	flag.IntVar(&o.conns, "writers", 8, "writer connections in the steady phases")
	flag.StringVar(&o.rates, "rates", "1000,5000,max", "steady-state writer rates (events/s)")
	flag.DurationVar(&o.steady, "steady-duration", 10*time.Second, "length of each steady-state run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "how long each steady-state run writes before it measures (connections, caches and the relay settle); those events are relayed but not counted")
	flag.Func("relay-arg", "an extra argument for every relay started (repeatable), such as --debug-addr=127.0.0.1:6060",
		func(v string) error { o.relayArgs = append(o.relayArgs, v); return nil })
	flag.StringVar(&o.trace, "latency-trace", "", "write each steady phase's latencies as CSV (µs since measuring began, µs to the consumer) to files with this prefix")
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
	o      options
	pool   *pgxpool.Pool
	res    []Result
	traced int // latency traces written
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
	if err := b.drains(ctx); err != nil {
		return err
	}
	if err := b.steadyStates(ctx); err != nil {
		return err
	}
	if o.big > 0 {
		if err := b.bigTransaction(ctx); err != nil {
			return err
		}
	}
	b.print()
	return b.write()
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

// relay is a running outbox-relay process.
type relay struct {
	cmd  *exec.Cmd
	done chan error
}

func (b *bench) startRelay(args ...string) (*relay, error) {
	// The drains end when the slot is confirmed past the last commit: a
	// 100 ms status interval (default 1 s) keeps that within 100 ms of the
	// last status row being durable. One thread for Go code: every process
	// shares the machine's cores.
	args = append(append([]string{"run", "--log-level", "warn", "--log-format", "console", "--status-interval", "100ms",
		"--max-procs", "1"}, args...), b.o.relayArgs...)
	cmd := exec.Command(b.o.relayBin, args...)
	cmd.Env = append(os.Environ(), "OUTBOX_DATABASE_URL="+b.o.dbURL, "OUTBOX_KAFKA_BROKERS="+b.o.brokers)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &relay{cmd: cmd, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	return r, nil
}

// usage reads the relay's peak RSS (MiB) and CPU seconds so far.
func (r *relay) usage() (float64, float64) {
	pid := r.cmd.Process.Pid
	var rss float64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				rss = kb / 1024
			}
		}
	}
	var cpu float64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		cpu = (ut + st) / 100 // clock ticks
	}
	return rss, cpu
}

func (r *relay) stop() error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		return err
	case <-time.After(60 * time.Second):
		_ = r.cmd.Process.Kill()
		return errors.New("relay did not stop within 60s")
	}
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// untilStreaming waits for a walsender in the streaming state.
func (b *bench) untilStreaming(ctx context.Context, who string) error {
	return waitFor(ctx, 30*time.Second, who+" to stream", func() (bool, error) {
		var n int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n)
		return n > 0, err
	})
}

func (b *bench) slotConfirmed(ctx context.Context, slot string) (pglogrepl.LSN, error) {
	var s *string
	err := b.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s)
	if err != nil || s == nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(*s)
}

// untilConfirmed waits until the relay has confirmed slot past end (every
// status row written), stops it, and returns the seconds since t0 and the
// relay's peak RSS and CPU seconds.
func (b *bench) untilConfirmed(ctx context.Context, r *relay, slot string, end pglogrepl.LSN, t0 time.Time, timeout time.Duration) (secs, rss, cpu float64, err error) {
	err = waitFor(ctx, timeout, "the relay to confirm "+slot, func() (bool, error) {
		l, err := b.slotConfirmed(ctx, slot)
		return l >= end, err
	})
	secs = time.Since(t0).Seconds()
	rss, cpu = r.usage()
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	return secs, rss, cpu, err
}

func (b *bench) sent(ctx context.Context) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`).Scan(&n)
	return n, err
}

// drains runs phases 1 to 3 on the same N events.
// drains runs the decode limit, the relay's drain and the poll-only drain
// --drain-runs times, in turn, and reports each phase's median run: a drain
// takes seconds, and on a machine every process shares one run can be 30 %
// off. The ratio to the decode limit is the median of each run's own ratio.
func (b *bench) drains(ctx context.Context) error {
	var runs [3][]Result
	for i := range max(b.o.drainRuns, 1) {
		fmt.Fprintf(os.Stderr, "drain run %d of %d\n", i+1, max(b.o.drainRuns, 1))
		rs, err := b.drainOnce(ctx)
		if err != nil {
			return err
		}
		for j := range rs {
			runs[j] = append(runs[j], rs[j])
		}
	}
	for _, rs := range runs {
		b.res = append(b.res, median(rs))
	}
	return nil
}

// median is the run with the median rate, with every run's rate, the median
// ratio to the decode limit and the highest peak RSS.
func median(rs []Result) Result {
	byRate := slices.Clone(rs)
	slices.SortFunc(byRate, func(a, b Result) int { return cmp.Compare(a.EventsPerS, b.EventsPerS) })
	m := byRate[(len(byRate)-1)/2]
	ratios := make([]float64, 0, len(rs))
	for _, r := range rs {
		m.RunsPerS = append(m.RunsPerS, r.EventsPerS)
		m.RSSMiB = max(m.RSSMiB, r.RSSMiB)
		ratios = append(ratios, r.VsDecode)
	}
	slices.Sort(ratios)
	m.VsDecode = ratios[(len(ratios)-1)/2]
	if len(rs) == 1 {
		m.RunsPerS = nil
	}
	return m
}

// drainOnce measures the three drains once each, in order.
func (b *bench) drainOnce(ctx context.Context) ([]Result, error) {
	var out []Result
	n := b.o.events
	for _, s := range []string{"bench_decode", "bench_relay"} {
		b.dropSlot(ctx, s)
		if err := b.exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, s); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "inserting %d events (1,000 per transaction)\n", n)
	if err := b.insertEvents(ctx, n, 1000); err != nil {
		return nil, err
	}
	end, err := b.lsn(ctx)
	if err != nil {
		return nil, err
	}

	// 1. Decode limit.
	t0 := time.Now()
	cmd := b.recvlogical("bench_decode", "--endpos", end.String())
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pg_recvlogical: %w", err)
	}
	decode := time.Since(t0).Seconds()
	b.dropSlot(ctx, "bench_decode")
	out = append(out, Result{Phase: "decode limit", Events: n, Seconds: decode, EventsPerS: float64(n) / decode,
		Description: "pg_recvlogical (pgoutput, binary) drains the events from a fresh slot"})
	decodeRate := float64(n) / decode

	// 2. Relay drain: from start to the slot confirmed past the last commit,
	// which happens only once every status row is written.
	if err := b.trimTopic(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "relay drain")
	t0 = time.Now()
	r, err := b.startRelay("--slot", "bench_relay")
	if err != nil {
		return nil, err
	}
	secs, rss, cpu, err := b.untilConfirmed(ctx, r, "bench_relay", end, t0, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	if got, err := b.sent(ctx); err != nil || got != n {
		return nil, fmt.Errorf("relay drain: %d SENT rows, want %d (%v)", got, n, err)
	}
	b.dropSlot(ctx, "bench_relay")
	out = append(out, Result{Phase: "relay drain", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		VsDecode: float64(n) / secs / decodeRate, RSSMiB: rss, CPUSeconds: cpu,
		Description: "outbox-relay streams the same events: Kafka acked, status rows written, slot confirmed"})

	// 3. Poll-only drain of the same events.
	fmt.Fprintln(os.Stderr, "poll-only drain")
	if err := b.exec(ctx, `TRUNCATE outbox.deliveries`); err != nil {
		return nil, err
	}
	if err := b.trimTopic(ctx); err != nil {
		return nil, err
	}
	t0 = time.Now()
	r, err = b.startRelay("--mode", "poll")
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, 20*time.Minute, "the poller to send every event", func() (bool, error) {
		got, err := b.sent(ctx)
		return got == n, err
	})
	secs = time.Since(t0).Seconds()
	rss, cpu = r.usage()
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, err
	}
	out = append(out, Result{Phase: "poll-only drain", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		VsDecode: float64(n) / secs / decodeRate, RSSMiB: rss, CPUSeconds: cpu,
		Description: "outbox-relay --mode=poll (a classic polling relay) drains the same events"})
	return out, b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}

// steadyStates runs phase 4 for the stream and for poll-only, and the writer
// alone for comparison.
func (b *bench) steadyStates(ctx context.Context) error {
	rates, err := parseRates(b.o.rates)
	if err != nil {
		return err
	}
	if err := b.writerAtMax(ctx, "writer alone (max)", "the writer's rate with no relay running"); err != nil {
		return err
	}
	if err := b.writerWithDecoder(ctx); err != nil {
		return err
	}
	for _, mode := range []string{"stream", "poll"} {
		for _, rate := range rates {
			b.dropSlot(ctx, "bench_steady")
			if err := b.trimTopic(ctx); err != nil {
				return err
			}
			args := []string{"--slot", "bench_steady"}
			if mode == "poll" {
				args = []string{"--mode", "poll"}
			}
			r, err := b.startRelay(args...)
			if err != nil {
				return err
			}
			if mode == "stream" {
				err = b.untilStreaming(ctx, "the relay")
				if err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "steady state: %s at %s events/s\n", mode, rateName(rate))
			res, err := b.steady(ctx, rate, r)
			if stopErr := r.stop(); err == nil {
				err = stopErr
			}
			if err != nil {
				return err
			}
			res.Phase = fmt.Sprintf("%s @ %s/s", mode, rateName(rate))
			res.Description = fmt.Sprintf("one event per transaction over %d connections, measured after a %s warm-up; latency from COMMIT returning to a consumer receiving the record", b.o.conns, b.o.warmup)
			b.res = append(b.res, res)
			b.dropSlot(ctx, "bench_steady")
			if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
				return err
			}
		}
	}
	return nil
}

// writerWithDecoder runs the writer as fast as it can while pg_recvlogical
// streams the same changes to /dev/null: what logical decoding alone costs
// the application on this machine, the floor under any streaming relay's
// cost.
func (b *bench) writerWithDecoder(ctx context.Context) error {
	const slot = "bench_floor"
	b.dropSlot(ctx, slot)
	defer b.dropSlot(ctx, slot)
	if err := b.exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		return err
	}
	cmd := b.recvlogical(slot, "--status-interval", "1")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pg_recvlogical: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := b.untilStreaming(ctx, "pg_recvlogical"); err != nil {
		return err
	}
	return b.writerAtMax(ctx, "writer + pg_recvlogical (max)",
		"the writer's rate while pg_recvlogical decodes its changes: the floor under a streaming relay's cost")
}

// writerAtMax runs the writer as fast as it can with no relay and records
// its rate as phase.
func (b *bench) writerAtMax(ctx context.Context, phase, description string) error {
	fmt.Fprintf(os.Stderr, "%s\n", phase)
	res, err := b.steady(ctx, 0, nil)
	if err != nil {
		return err
	}
	res.Phase, res.Description = phase, description
	b.res = append(b.res, res)
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}

// recvlogical is pg_recvlogical streaming slot with pgoutput (as the relay
// asks for it) to /dev/null.
func (b *bench) recvlogical(slot string, args ...string) *exec.Cmd {
	cmd := exec.Command("pg_recvlogical", append([]string{"-d", b.o.dbURL, "--slot", slot, "--start",
		"-o", "proto_version=1", "-o", "publication_names=outbox_relay", "-o", "binary=true", "-f", "/dev/null"},
		args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f == "max" {
			out = append(out, 0)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--rates: %q is not a rate or max", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func rateName(r int) string {
	if r == 0 {
		return "max"
	}
	return strconv.Itoa(r)
}

// steady writes at rate (0: as fast as possible) for the warm-up and then the
// steady duration and, with a relay running, measures each event committed
// after the warm-up from its COMMIT to its arrival at a consumer.
func (b *bench) steady(ctx context.Context, rate int, r *relay) (Result, error) {
	var commits sync.Map  // event id -> commit time, as the writer saw COMMIT return
	var arrivals sync.Map // event id -> when the consumer received it
	var arrived atomic.Int64
	var latencies []time.Duration
	total := 0
	consumerDone := make(chan struct{})
	stopConsumer := make(chan struct{})
	var cl *kgo.Client
	if r != nil {
		// Start exactly at the current end of every partition.
		admCl, err := kgo.NewClient(kgo.SeedBrokers(b.o.brokers))
		if err != nil {
			return Result{}, err
		}
		ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, b.o.topic)
		admCl.Close()
		if err != nil {
			return Result{}, fmt.Errorf("listing end offsets: %w", err)
		}
		from := map[string]map[int32]kgo.Offset{b.o.topic: {}}
		ends.Each(func(o kadm.ListedOffset) { from[b.o.topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
		cl, err = kgo.NewClient(kgo.SeedBrokers(b.o.brokers), kgo.ConsumePartitions(from), kgo.FetchMaxWait(10*time.Millisecond))
		if err != nil {
			return Result{}, err
		}
		defer cl.Close()
		go func() {
			defer close(consumerDone)
			for {
				select {
				case <-stopConsumer:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := cl.PollFetches(pctx)
				cancel()
				// Receive time: the broker answers a waiting fetch as soon as
				// a record is appended, so this is the append time plus the
				// fetch's trip back.
				now := time.Now()
				fs.EachRecord(func(rec *kgo.Record) {
					for _, h := range rec.Headers {
						if h.Key == "outbox-event-id" {
							if _, dup := arrivals.LoadOrStore(string(h.Value), now); !dup {
								arrived.Add(1)
							}
						}
					}
				})
			}
		}()
	}

	var next atomic.Int64
	var written, measured atomic.Int64
	start := time.Now()
	measureFrom := start.Add(b.o.warmup)
	deadline := measureFrom.Add(b.o.steady)
	var wg sync.WaitGroup
	errs := make(chan error, b.o.conns)
	for w := 0; w < b.o.conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, b.o.dbURL)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for {
				i := next.Add(1) - 1
				if rate > 0 {
					at := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
					if at.After(deadline) {
						return
					}
					time.Sleep(time.Until(at))
				} else if time.Now().After(deadline) {
					return
				}
				var id string
				err := conn.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload, event_type)
					VALUES ($1, 'customer-' || ($2::bigint % 1000), jsonb_build_object('order_id', $2::bigint,
					        'amount', 12.5, 'currency', 'EUR', 'note', repeat('x', 420)), 'order.created')
					RETURNING id::text`, b.o.topic, i).Scan(&id)
				if err != nil {
					errs <- err
					return
				}
				written.Add(1)
				if now := time.Now(); !now.Before(measureFrom) {
					commits.Store(id, now)
					measured.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(measureFrom).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, fmt.Errorf("writer: %w", err)
	}
	total = int(measured.Load())
	res := Result{Events: total, Seconds: elapsed, WriterRate: float64(total) / elapsed, TargetRate: rate}
	if r == nil {
		res.EventsPerS = res.WriterRate
		return res, nil
	}
	// Wait for the stragglers.
	_ = waitFor(ctx, 60*time.Second, "every event at the consumer", func() (bool, error) {
		return arrived.Load() >= written.Load(), nil
	})
	close(stopConsumer)
	<-consumerDone
	// Some events reach Kafka before the writer sees its COMMIT return; they
	// count with their (tiny or negative) latency, floored at 0.
	var trace []string
	commits.Range(func(k, v any) bool {
		if a, ok := arrivals.Load(k); ok {
			l := max(a.(time.Time).Sub(v.(time.Time)), 0)
			latencies = append(latencies, l)
			if b.o.trace != "" {
				trace = append(trace, fmt.Sprintf("%d,%d", v.(time.Time).Sub(measureFrom).Microseconds(), l.Microseconds()))
			}
		}
		return true
	})
	if b.o.trace != "" {
		sort.Strings(trace)
		b.traced++
		name := fmt.Sprintf("%s-%d-%s.csv", b.o.trace, b.traced, rateName(rate))
		if err := os.WriteFile(name, []byte(strings.Join(trace, "\n")), 0o644); err != nil {
			return Result{}, err
		}
	}
	if len(latencies) < total {
		var sent int
		_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`).Scan(&sent)
		return Result{}, fmt.Errorf("only %d of %d events reached the consumer (%d SENT rows)", len(latencies), total, sent)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(latencies)))) - 1
		return float64(latencies[max(i, 0)].Microseconds()) / 1000
	}
	res.EventsPerS = res.WriterRate
	res.P50ms, res.P95ms, res.P99ms, res.MaxMs = q(0.50), q(0.95), q(0.99), q(1)
	res.RSSMiB, res.CPUSeconds = r.usage()
	return res, nil
}

// bigTransaction relays one transaction of many rows and reports peak RSS.
func (b *bench) bigTransaction(ctx context.Context) error {
	b.dropSlot(ctx, "bench_big")
	if err := b.trimTopic(ctx); err != nil {
		return err
	}
	r, err := b.startRelay("--slot", "bench_big")
	if err != nil {
		return err
	}
	defer b.dropSlot(ctx, "bench_big")
	if err := b.untilStreaming(ctx, "the relay"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "one transaction of %d events\n", b.o.big)
	t0 := time.Now()
	if err := b.insertEvents(ctx, b.o.big, b.o.big); err != nil {
		return err
	}
	end, err := b.lsn(ctx)
	if err != nil {
		return err
	}
	secs, rss, cpu, err := b.untilConfirmed(ctx, r, "bench_big", end, t0, 30*time.Minute)
	if err != nil {
		return err
	}
	b.res = append(b.res, Result{Phase: fmt.Sprintf("one %d-row transaction", b.o.big), Events: b.o.big, Seconds: secs,
		EventsPerS: float64(b.o.big) / secs, RSSMiB: rss, CPUSeconds: cpu,
		Description: "INSERT ... SELECT of every row in one transaction, from its start to the slot confirmed"})
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}

func (b *bench) print() {
	fmt.Printf("\n%-31s %9s %8s %10s %7s %8s %8s %8s %8s %8s %7s %9s\n",
		"phase", "events", "seconds", "events/s", "vs dec", "p50 ms", "p95 ms", "p99 ms", "max ms", "RSS MiB", "CPU s", "writer/s")
	for _, r := range b.res {
		fmt.Printf("%-31s %9d %8.2f %10.0f %7s %8s %8s %8s %8s %8s %7s %9s\n", r.Phase, r.Events, r.Seconds, r.EventsPerS,
			pct(r.VsDecode), num(r.P50ms), num(r.P95ms), num(r.P99ms), num(r.MaxMs), num(r.RSSMiB), num(r.CPUSeconds), num(r.WriterRate))
	}
	for _, r := range b.res {
		if len(r.RunsPerS) > 1 {
			runs := make([]string, len(r.RunsPerS))
			for i, v := range r.RunsPerS {
				runs[i] = fmt.Sprintf("%.0f", v)
			}
			fmt.Printf("%s: median of %d runs (events/s: %s)\n", r.Phase, len(runs), strings.Join(runs, ", "))
		}
	}
	// The writer's rate at max beside each relay, as a share of its rate alone.
	rates := map[string]float64{}
	for _, r := range b.res {
		rates[r.Phase] = r.WriterRate
	}
	if alone := rates["writer alone (max)"]; alone > 0 {
		for _, p := range []string{"writer + pg_recvlogical (max)", "stream @ max/s", "poll @ max/s"} {
			if v, ok := rates[p]; ok {
				fmt.Printf("writer rate, %s: %.0f %% of the writer alone\n", p, 100*v/alone)
			}
		}
	}
}

func pct(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

func num(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func (b *bench) write() error {
	if err := os.MkdirAll(b.o.outDir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	out := map[string]any{"when": time.Now().UTC().Format(time.RFC3339), "host": host, "cpus": numCPU(),
		"events": b.o.events, "writers": b.o.conns, "steady_duration_s": b.o.steady.Seconds(), "warmup_s": b.o.warmup.Seconds(), "results": b.res}
	j, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(filepath.Join(b.o.outDir, "results.json"), j, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.o.outDir, "latency.svg"), latencySVG(b.res), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(b.o.outDir, "results.json"), filepath.Join(b.o.outDir, "latency.svg"))
	return nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// redraw renders latency.svg from a results.json written earlier.
func redraw(path, outDir string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Results []Result `json:"results"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return os.WriteFile(filepath.Join(outDir, "latency.svg"), latencySVG(doc.Results), 0o644)
}
