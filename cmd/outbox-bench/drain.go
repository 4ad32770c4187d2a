package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
)

// drains runs the decode limit, the relay's drain, the poll-only drain and
// the Debezium-shaped table's drain
// --drain-runs times, in turn, and reports each phase's median run: a drain
// takes seconds, and on a machine every process shares one run can be 30 %
// off. The ratio to the decode limit is the median of each run's own ratio.
func (b *bench) drains(ctx context.Context) error {
	var runs [4][]Result
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

// drainOnce measures the four drains once each, in order, on the same
// number of events (the Debezium-shaped ones are written to their table).
func (b *bench) drainOnce(ctx context.Context) ([]Result, error) {
	n := b.o.events
	end, err := b.backlog(ctx, n, "bench_decode", "bench_relay")
	if err != nil {
		return nil, err
	}
	decode, err := b.decodeLimit(ctx, n, end)
	if err != nil {
		return nil, err
	}
	stream, err := b.relayDrain(ctx, n, end, decode.EventsPerS)
	if err != nil {
		return nil, err
	}
	poll, err := b.pollDrain(ctx, n, decode.EventsPerS)
	if err != nil {
		return nil, err
	}
	if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
		return nil, err
	}
	dbz, err := b.debeziumDrain(ctx, n, decode.EventsPerS, stream.EventsPerS)
	if err != nil {
		return nil, err
	}
	return []Result{decode, stream, poll, dbz}, nil
}

// backlog creates each slot afresh, then commits n events (1,000 per
// transaction) for them to drain, and returns the WAL position after the
// last commit.
func (b *bench) backlog(ctx context.Context, n int, slots ...string) (pglogrepl.LSN, error) {
	for _, s := range slots {
		if err := b.freshSlot(ctx, s); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(os.Stderr, "inserting %d events (1,000 per transaction)\n", n)
	if err := b.insertEvents(ctx, n, 1000); err != nil {
		return 0, err
	}
	return b.lsn(ctx)
}

// perEvent is cpu seconds for n events in µs per event.
func perEvent(cpu float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return cpu / float64(n) * 1e6
}

// decodeLimit: pg_recvlogical drains the n events up to end from a fresh
// slot.
func (b *bench) decodeLimit(ctx context.Context, n int, end pglogrepl.LSN) (Result, error) {
	t0 := time.Now()
	if err := b.recvlogical("bench_decode", "--endpos", end.String()).Run(); err != nil {
		return Result{}, fmt.Errorf("pg_recvlogical: %w", err)
	}
	secs := time.Since(t0).Seconds()
	b.dropSlot(ctx, "bench_decode")
	return Result{Phase: "decode limit", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		Description: "pg_recvlogical (pgoutput, binary) drains the events from a fresh slot"}, nil
}

// relayDrain: from the relay's start to the slot confirmed past the last
// commit, which happens only once every status row is written. Status rows
// already SENT before it (the growth phase's) are not its own; decodeRate 0:
// no decode limit to compare with.
func (b *bench) relayDrain(ctx context.Context, n int, end pglogrepl.LSN, decodeRate float64) (Result, error) {
	if err := b.trimTopic(ctx); err != nil {
		return Result{}, err
	}
	before, err := b.sent(ctx)
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintln(os.Stderr, "relay drain")
	t0, broker0 := time.Now(), b.brokerCPU()
	r, err := b.startRelay("--slot", "bench_relay")
	if err != nil {
		return Result{}, err
	}
	secs, rss, cpu, err := b.untilConfirmed(ctx, r, "bench_relay", end, t0, 10*time.Minute)
	if err != nil {
		return Result{}, err
	}
	broker := b.brokerCPU() - broker0
	if got, err := b.sent(ctx); err != nil || got-before != n {
		return Result{}, fmt.Errorf("relay drain: %d new SENT rows, want %d (%v)", got-before, n, err)
	}
	b.dropSlot(ctx, "bench_relay")
	var vs float64
	if decodeRate > 0 {
		vs = float64(n) / secs / decodeRate
	}
	return Result{Phase: "relay drain", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		VsDecode: vs, RSSMiB: rss, CPUSeconds: cpu, CPUPerEvent: perEvent(cpu, n), BrokerCPU: broker,
		Description: "outbox-relay streams the same events: Kafka acked, status rows written, slot confirmed"}, nil
}

// pollDrain: a poll-only relay delivers the same events again.
func (b *bench) pollDrain(ctx context.Context, n int, decodeRate float64) (Result, error) {
	fmt.Fprintln(os.Stderr, "poll-only drain")
	if err := b.exec(ctx, `TRUNCATE outbox.deliveries`); err != nil {
		return Result{}, err
	}
	if err := b.trimTopic(ctx); err != nil {
		return Result{}, err
	}
	run, err := b.runUntilSent(ctx, n, 20*time.Minute, "the poller to send every event", "--mode", "poll")
	secs := run.secs
	return Result{Phase: "poll-only drain", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		VsDecode: float64(n) / secs / decodeRate, RSSMiB: run.rssMiB, CPUSeconds: run.cpuS, CPUPerEvent: perEvent(run.cpuS, n),
		BrokerCPU:   run.brokerCPU,
		Description: "outbox-relay --mode=poll (a classic polling relay) drains the same events"}, err
}
