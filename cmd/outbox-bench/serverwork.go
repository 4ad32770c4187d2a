package main

import (
	"context"
	"fmt"
	"os"
)

// serverWork counts what the server did on its own that can stall the
// stream: checkpoints (timed, requested) and autovacuum and autoanalyze
// runs on the outbox's two tables.
type serverWork struct {
	timed, requested, vacuums, analyzes int64
}

// serverWorkSQL reads the counters: pg_stat_checkpointer from PostgreSQL 17,
// pg_stat_bgwriter before.
const (
	serverWorkTables = `SELECT coalesce(sum(autovacuum_count), 0), coalesce(sum(autoanalyze_count), 0)
		FROM pg_stat_user_tables WHERE schemaname = 'outbox' AND relname IN ('events', 'deliveries')`
	checkpointsFrom17 = `SELECT num_timed, num_requested FROM pg_stat_checkpointer`
	checkpointsTo16   = `SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter`
)

func (b *bench) serverWork(ctx context.Context) (w serverWork, err error) {
	var version int
	if err := b.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return w, err
	}
	q := checkpointsTo16
	if version >= 170000 {
		q = checkpointsFrom17
	}
	if err := b.pool.QueryRow(ctx, q).Scan(&w.timed, &w.requested); err != nil {
		return w, fmt.Errorf("reading checkpoints: %w", err)
	}
	if err := b.pool.QueryRow(ctx, serverWorkTables).Scan(&w.vacuums, &w.analyzes); err != nil {
		return w, fmt.Errorf("reading autovacuum runs: %w", err)
	}
	return w, nil
}

// since returns what the server did between before and w, for a log line.
func (w serverWork) since(before serverWork) string {
	return fmt.Sprintf("checkpoints %d timed, %d requested; on outbox.events and outbox.deliveries autovacuum %d, autoanalyze %d",
		w.timed-before.timed, w.requested-before.requested, w.vacuums-before.vacuums, w.analyzes-before.analyzes)
}

// noteServerWork reads the server's counters now and returns a function
// that logs, as what, what the server did since: the growth phase's stream
// runs call it so that a stall can be read against checkpoints and
// autovacuum.
func (b *bench) noteServerWork(ctx context.Context, what string) (done func()) {
	before, err := b.serverWork(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: reading the server's counters: %v\n", what, err)
		return func() {}
	}
	return func() {
		if after, err := b.serverWork(ctx); err == nil {
			fmt.Fprintf(os.Stderr, "%s: the server meanwhile: %s\n", what, after.since(before))
		}
	}
}
