package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

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
	t0, broker0 := time.Now(), b.brokerCPU()
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
		EventsPerS: float64(b.o.big) / secs, RSSMiB: rss, CPUSeconds: cpu, CPUPerEvent: perEvent(cpu, b.o.big),
		BrokerCPU:   b.brokerCPU() - broker0,
		Description: "INSERT ... SELECT of every row in one transaction, from its start to the slot confirmed"})
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}
