package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

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
	if err := b.writerWithDecoder(ctx, rates); err != nil {
		return err
	}
	if err := b.wakeFloors(ctx, rates); err != nil {
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
			res, err := b.steady(ctx, rate, r, r.pid())
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

// writerWithDecoder runs the writer while pg_recvlogical streams the same
// changes to /dev/null: as fast as it can, for what logical decoding alone
// costs the application on this machine (the floor under any streaming
// relay's cost to the writer), and at each fixed rate of rates, for
// pg_recvlogical's own CPU per event (the floor under a streaming relay's
// CPU per event at that rate: receiving, before anything is published or
// recorded).
func (b *bench) writerWithDecoder(ctx context.Context, rates []int) error {
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
	if err := b.writerAtMax(ctx, "writer + pg_recvlogical (max)",
		"the writer's rate while pg_recvlogical decodes its changes: the floor under a streaming relay's cost"); err != nil {
		return err
	}
	for _, rate := range fixed(rates) {
		phase := fmt.Sprintf("pg_recvlogical @ %d/s", rate)
		fmt.Fprintln(os.Stderr, phase)
		res, err := b.steady(ctx, rate, nil, cmd.Process.Pid)
		if err != nil {
			return err
		}
		res.Phase = phase
		res.Description = "pg_recvlogical's CPU per event (in the CPU columns) while it follows a writer of one event per transaction: " +
			"PostgreSQL's own client only receiving, the floor under a streaming relay's CPU per event at this rate"
		b.res = append(b.res, res)
		if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
			return err
		}
	}
	return nil
}

// writerAtMax runs the writer as fast as it can with no relay and records
// its rate as phase.
func (b *bench) writerAtMax(ctx context.Context, phase, description string) error {
	fmt.Fprintf(os.Stderr, "%s\n", phase)
	res, err := b.steady(ctx, 0, nil, 0)
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
		"-o", "proto_version=1", "-o", "publication_names=" + cdc.PublicationDefault, "-o", "binary=true", "-f", "/dev/null"},
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

// fixed is rates without max (0).
func fixed(rates []int) []int {
	return slices.DeleteFunc(slices.Clone(rates), func(r int) bool { return r == 0 })
}

func rateName(r int) string {
	if r == 0 {
		return "max"
	}
	return strconv.Itoa(r)
}

// steady writes at rate (0: as fast as possible) for the warm-up and then the
// steady duration and, with a relay running, measures each event committed
// after the warm-up from its COMMIT to its arrival at a consumer. The CPU
// columns are process cpuPID's (0: none), over the measured window.
func (b *bench) steady(ctx context.Context, rate int, r *relayProcess, cpuPID int) (Result, error) {
	var c *consumer
	if r != nil {
		var err error
		if c, err = b.startConsumer(ctx); err != nil {
			return Result{}, err
		}
		defer c.stop()
	}
	// CPU over the measured window only: from the end of the warm-up to
	// the end of writing.
	cpu := func() (proc, broker float64) {
		if cpuPID != 0 {
			proc = cpuSeconds(cpuPID)
		}
		return proc, b.brokerCPU()
	}
	atWarmup := make(chan [2]float64, 1)
	atMeasure := b.atMeasure
	measuring := time.AfterFunc(b.o.warmup, func() {
		relay, broker := cpu()
		if atMeasure != nil {
			atMeasure() // before the send: done by the time steady reads atWarmup
		}
		atWarmup <- [2]float64{relay, broker}
	})
	defer measuring.Stop()
	w, err := b.write(ctx, rate)
	if err != nil {
		return Result{}, err
	}
	proc1, broker1 := cpu()
	cpu0 := <-atWarmup // write ran past the warm-up
	total := int(w.measured.Load())
	res := Result{Events: total, Seconds: w.elapsed, WriterRate: float64(total) / w.elapsed, TargetRate: rate,
		EventsPerS: float64(total) / w.elapsed}
	if cpuPID != 0 {
		res.CPUPerEvent = perEvent(proc1-cpu0[0], total)
		res.BrokerCPU = broker1 - cpu0[1]
	}
	if r == nil {
		return res, nil
	}
	// Wait for the stragglers.
	_ = waitFor(ctx, 60*time.Second, "every event at the consumer", func() (bool, error) {
		return c.arrived.Load() >= w.written.Load(), nil
	})
	c.stop()
	var timed []timedLatency
	latencies, err := b.latencies(w, c, rate, &timed)
	if err != nil {
		return Result{}, err
	}
	res.RSSMiB, res.CPUSeconds = r.usage()
	if len(latencies) < total {
		sent, _ := b.sent(ctx)
		res.Late = total - len(latencies)
		return res, fmt.Errorf("%w: only %d of %d events reached the consumer (%d SENT rows)", errLate, len(latencies), total, sent)
	}
	q := func(p float64) float64 { return quantileMs(latencies, p) }
	res.P50ms, res.P95ms, res.P99ms, res.MaxMs = q(0.50), q(0.95), q(0.99), q(1)
	res.latencies = latencies
	slices.SortFunc(timed, func(a, b timedLatency) int { return a.at.Compare(b.at) })
	res.timed, res.measureFrom = timed, w.measureFrom
	return res, nil
}

// quantileMs returns the p quantile of sorted (not empty) in ms.
func quantileMs(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)].Microseconds()) / 1000
}

// errLate says that events of a steady run had not reached the consumer a
// minute after the writer stopped; the Result's Late counts them.
var errLate = errors.New("events late")

// consumer reads the bench topic from its end when it started and notes when
// each event first arrives.
type consumer struct {
	arrivals sync.Map // event id -> when the consumer received it
	arrived  atomic.Int64
	stop     func() // idempotent
}

func (b *bench) startConsumer(ctx context.Context) (*consumer, error) {
	// Start exactly at the current end of every partition.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.o.brokers))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, b.o.topic)
	admCl.Close()
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	from := map[string]map[int32]kgo.Offset{b.o.topic: {}}
	ends.Each(func(o kadm.ListedOffset) { from[b.o.topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.o.brokers), kgo.ConsumePartitions(from), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	c := &consumer{}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.stop = sync.OnceFunc(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			// Receive time: the broker answers a waiting fetch as soon as a
			// record is appended, so this is the append time plus the
			// fetch's trip back.
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				for _, h := range rec.Headers {
					if h.Key == kafka.HeaderEventID {
						if _, dup := c.arrivals.LoadOrStore(string(h.Value), now); !dup {
							c.arrived.Add(1)
						}
					}
				}
			})
		}
	}()
	return c, nil
}

// writers is what the writer connections did.
type writers struct {
	commits           sync.Map // event id -> when COMMIT returned, for events measured
	alt               sync.Map // event id -> true, for events measured written to b.alternate
	due               sync.Map // event id -> when it was due, for events measured at a fixed rate
	written, measured atomic.Int64
	measureFrom       time.Time
	elapsed           float64 // seconds measured
}

// write runs the writer connections at rate (0: as fast as they can), one
// event per transaction, for the warm-up and the steady duration.
func (b *bench) write(ctx context.Context, rate int) (*writers, error) {
	w := &writers{}
	var next atomic.Int64
	start := time.Now()
	w.measureFrom = start.Add(b.o.warmup)
	deadline := w.measureFrom.Add(b.o.steady)
	g, ctx := errgroup.WithContext(ctx)
	for range b.o.conns {
		g.Go(func() error {
			conn, err := pgx.Connect(ctx, b.o.dbURL)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var alt *pgx.Conn // with b.alternate, the blocks off go there
			if b.alternate != "" {
				if alt, err = pgx.Connect(ctx, b.alternate); err != nil {
					return err
				}
				defer alt.Close(ctx)
			}
			for {
				i := next.Add(1) - 1
				c, toAlt := conn, false
				var at time.Time
				if rate > 0 {
					at = start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
					if at.After(deadline) {
						return nil
					}
					if alt != nil {
						toAlt = i%2 == 1 // in the warm-up, each in turn
						if !at.Before(w.measureFrom) {
							toAlt = !blockOn(int(at.Sub(w.measureFrom) / interleaveBlock))
						}
						if toAlt {
							c = alt
						}
					}
					time.Sleep(time.Until(at))
				} else if time.Now().After(deadline) {
					return nil
				}
				var id string
				err := c.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload, event_type)
					VALUES ($1, 'customer-' || ($2::bigint % 1000), jsonb_build_object('order_id', $2::bigint,
					        'amount', 12.5, 'currency', 'EUR', 'note', repeat('x', 420)), 'order.created')
					RETURNING id::text`, b.o.topic, i).Scan(&id)
				if err != nil {
					return err
				}
				w.written.Add(1)
				if now := time.Now(); !now.Before(w.measureFrom) {
					w.commits.Store(id, now)
					if toAlt {
						w.alt.Store(id, true)
					}
					if rate > 0 {
						w.due.Store(id, at)
					}
					w.measured.Add(1)
				}
			}
		})
	}
	err := g.Wait()
	w.elapsed = time.Since(w.measureFrom).Seconds()
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	return w, nil
}

// latencies are the measured events' COMMIT-to-consumer times, sorted, and
// written as a trace with --latency-trace. Some events reach Kafka before the
// writer sees its COMMIT return; they count with their (tiny or negative)
// latency, floored at 0.
func (b *bench) latencies(w *writers, c *consumer, rate int, timed *[]timedLatency) ([]time.Duration, error) {
	var latencies []time.Duration
	var trace []string
	w.commits.Range(func(k, v any) bool {
		if a, ok := c.arrivals.Load(k); ok {
			l := max(a.(time.Time).Sub(v.(time.Time)), 0)
			latencies = append(latencies, l)
			_, alt := w.alt.Load(k)
			t := timedLatency{at: v.(time.Time), latency: l, alt: alt}
			if due, ok := w.due.Load(k); ok {
				t.at = due.(time.Time)
			}
			*timed = append(*timed, t)
			if b.o.trace != "" {
				trace = append(trace, fmt.Sprintf("%d,%d", v.(time.Time).Sub(w.measureFrom).Microseconds(), l.Microseconds()))
			}
		}
		return true
	})
	slices.Sort(latencies)
	if b.o.trace == "" {
		return latencies, nil
	}
	sort.Strings(trace)
	b.traced++
	name := fmt.Sprintf("%s-%d-%s.csv", b.o.trace, b.traced, rateName(rate))
	fmt.Fprintf(os.Stderr, "latency trace %s: measuring began at %s\n", name, w.measureFrom.UTC().Format(time.RFC3339Nano))
	return latencies, os.WriteFile(name, []byte(strings.Join(trace, "\n")), 0o644)
}
