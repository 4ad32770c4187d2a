package main

import (
	"context"
	"fmt"
	"os"
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
	b.dropSlot(ctx, "bench_steady")
	defer b.dropSlot(ctx, "bench_steady")
	if err := b.trimTopic(ctx); err != nil {
		return err
	}
	r, err := b.startRelay("--slot", "bench_steady", "--retention", "168h")
	if err != nil {
		return err
	}
	if err := b.untilStreaming(ctx, "the relay"); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "steady state: stream at 1000 events/s while retention purges")
	res, err := b.steady(ctx, 1000, r, r.pid())
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return err
	}
	var left int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.events WHERE created_at < now() - interval '7 days'`).Scan(&left); err != nil {
		return err
	}
	res.Phase = "stream @ 1000/s, purging"
	res.Description = fmt.Sprintf("as stream @ 1000/s while --retention deletes %d old SENT events (%d deleted by the end of the run)",
		n, n-left)
	b.res = append(b.res, res)
	return b.exec(ctx, `TRUNCATE outbox.events CASCADE`)
}
