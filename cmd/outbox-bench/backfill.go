package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// backfillPhase: --backfill-events events are written before the relay
// first starts on a new slot; the relay creates the slot and delivers them
// through its backfill (the poll path), while the stream is already live.
// Timed from the relay's start to the last event SENT.
func (b *bench) backfillPhase(ctx context.Context) error {
	n := b.o.backfill
	b.dropSlot(ctx, "bench_backfill")
	if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
		return err
	}
	if err := b.trimTopic(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "backfill: inserting %d events before the relay's first start\n", n)
	if err := b.insertEvents(ctx, n, 1000); err != nil {
		return err
	}
	if err := b.exec(ctx, `VACUUM ANALYZE outbox.events`); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "backfill")
	run, err := b.runUntilSent(ctx, n, 30*time.Minute, "the backfill to send every event", "--slot", "bench_backfill")
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	res := Result{Phase: "backfill", Events: n, Seconds: run.secs, EventsPerS: float64(n) / run.secs,
		RSSMiB: run.rssMiB, CPUSeconds: run.cpuS, CPUPerEvent: perEvent(run.cpuS, n), BrokerCPU: run.brokerCPU,
		Description: "events written before the relay's first start, delivered by its backfill; from the start to the last SENT"}
	for _, d := range b.res {
		if d.Phase == "relay drain" && d.EventsPerS > 0 {
			res.VsDrain = res.EventsPerS / d.EventsPerS
		}
	}
	b.res = append(b.res, res)
	if b.o.consoleRuns > 0 {
		if err := b.consolePhase(ctx); err != nil {
			return err
		}
	}
	b.dropSlot(ctx, "bench_backfill")
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}
