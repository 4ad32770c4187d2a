package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// purgeSteady measures the stream at 1,000 events/s while the relay's
// retention deletes --purge-events SENT events created 30 days ago, for
// comparison with the plain "stream @ 1000/s" row.
func (b *bench) purgeSteady(ctx context.Context) error {
	n := b.o.purge
	fmt.Fprintf(os.Stderr, "seeding %d SENT events created 30 days ago\n", n)
	if err := b.exec(ctx, `INSERT INTO outbox.events (topic, key, payload, created_at)
		SELECT $1, 'customer-' || (s % 1000), jsonb_build_object('order_id', s, 'note', repeat('x', 380)),
		       now() - interval '30 days' + s * interval '1 millisecond'
		FROM generate_series(1, $2) AS s`, b.o.topic, n); err != nil {
		return fmt.Errorf("seeding old events: %w", err)
	}
	if err := b.exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, attempts, sent_at)
		SELECT id, 'SENT', 1, created_at FROM outbox.events`); err != nil {
		return fmt.Errorf("seeding their status rows: %w", err)
	}
	if err := b.exec(ctx, `VACUUM ANALYZE outbox.events, outbox.deliveries`); err != nil {
		return err
	}
	res, deleted, _, err := b.streamWhileRetaining(ctx, 7*24*time.Hour)
	if err != nil {
		return err
	}
	res.Phase = "stream @ 1000/s, purging"
	res.Description = fmt.Sprintf("as stream @ 1000/s while --retention deletes %d old SENT events (%d deleted by the end of the run)",
		n, deleted)
	b.res = append(b.res, res)
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}

// freshSlot creates slot afresh before the relay starts on it: a relay
// that creates its slot first backfills, walking every event within
// --retention, which is not what the phases measure.
func (b *bench) freshSlot(ctx context.Context, slot string) error {
	b.dropSlot(ctx, slot)
	return b.exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
}

// warmAtLeast makes the steady runs' warm-up at least d until the returned
// function puts it back.
func (b *bench) warmAtLeast(d time.Duration) (restore func()) {
	w := b.o.warmup
	b.o.warmup = max(w, d)
	return func() { b.o.warmup = w }
}

// retentionWarmup is the least warm-up of a stream measured while
// retention deletes: 10 quiet seconds for the relay to know the stream's
// usual delay, and a few for retention to start.
const retentionWarmup = 15 * time.Second

// streamWhileRetaining runs the stream at 1,000 events/s with a relay whose
// --retention is retention (from its start, it deletes what is older), and
// returns the stream's result, how many events older than the retention
// were deleted, and over how many seconds (the relay's run).
func (b *bench) streamWhileRetaining(ctx context.Context, retention time.Duration, relayArgs ...string) (res Result, deleted int, secs float64, err error) {
	if err := b.freshSlot(ctx, "bench_steady"); err != nil {
		return res, 0, 0, err
	}
	defer b.dropSlot(ctx, "bench_steady")
	if err := b.trimTopic(ctx); err != nil {
		return res, 0, 0, err
	}
	older := func() (n int, err error) {
		err = b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.events WHERE created_at < now() - make_interval(secs => $1)`,
			retention.Seconds()).Scan(&n)
		return n, err
	}
	before, err := older()
	if err != nil {
		return res, 0, 0, err
	}
	defer b.noteServerWork(ctx, "retention run")()
	if b.o.trace != "" {
		b.activity++
		defer b.sampleActivity(ctx, fmt.Sprintf("%s-activity-%d.csv", b.o.trace, b.activity))()
	}
	t0 := time.Now()
	r, err := b.startRelay(append([]string{"--slot", "bench_steady", "--retention", retention.String()}, relayArgs...)...)
	if err != nil {
		return res, 0, 0, err
	}
	if err := b.untilStreaming(ctx, "the relay"); err != nil {
		_ = r.stop()
		return res, 0, 0, err
	}
	if _, err := r.untilSwept(ctx, t0); err != nil { // what is measured is retention, not the first sweep
		_ = r.stop()
		return res, 0, 0, err
	}
	fmt.Fprintln(os.Stderr, "steady state: stream at 1000 events/s while retention purges")
	// Retention waits for 10 quiet seconds of the stream to know its usual
	// delay before it deletes: the measured window starts after them.
	defer b.warmAtLeast(retentionWarmup)()
	// How many it deletes in the measured window: a run in which it
	// deleted nothing measures nothing (it did, once, when a walk went on
	// from where one over a smaller fill had ended). Read from the
	// server's counter of deleted rows (serverWork), not by counting rows:
	// a count(*) of 20,000,000 events in the measured window stalled the
	// stream itself (run 30).
	atMeasure := make(chan serverWork, 1)
	b.atMeasure = func() {
		if w, err := b.serverWork(ctx); err == nil {
			atMeasure <- w
		}
	}
	defer func() { b.atMeasure = nil }()
	res, err = b.steady(ctx, 1000, r, r.pid())
	select { // empty if the run ended before its window, or the read failed
	case start := <-atMeasure:
		if end, derr := b.serverWork(ctx); derr == nil {
			res.DeletedMeasured = int(end.eventsDeleted - start.eventsDeleted)
			fmt.Fprintf(os.Stderr, "retention run: about %d events deleted in the measured window\n", res.DeletedMeasured)
			if res.DeletedMeasured == 0 {
				fmt.Fprintln(os.Stderr, "retention run: WARNING: retention deleted nothing while the stream was measured; this run measures the stream alone")
			}
		}
	default:
	}
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	secs = time.Since(t0).Seconds()
	if err != nil && !errors.Is(err, errLate) {
		return res, 0, 0, err
	}
	left, lerr := older()
	if lerr != nil {
		return res, 0, 0, lerr
	}
	return res, before - left, secs, err
}
