package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// serverWork counts what the server did on its own that can stall the
// stream: checkpoints (timed, requested) and autovacuum and autoanalyze
// runs on the outbox's two tables, and the WAL it wrote; and the rows
// deleted from outbox.events (each backend's counts reach the view within
// a second).
type serverWork struct {
	timed, requested, vacuums, analyzes int64
	wal                                 int64 // bytes: the WAL's insert position
	eventsDeleted                       int64
}

// The counters' statements: checkpoints from pg_stat_checkpointer from
// PostgreSQL 17, pg_stat_bgwriter before.
const (
	serverWorkTables = `SELECT coalesce(sum(autovacuum_count), 0), coalesce(sum(autoanalyze_count), 0),
		(pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint, coalesce(sum(n_tup_del) FILTER (WHERE relname = 'events'), 0)
		FROM pg_stat_user_tables WHERE schemaname = 'outbox' AND relname IN ('events', 'deliveries')`
	checkpointsFrom17 = `SELECT num_timed, num_requested FROM pg_stat_checkpointer`
	checkpointsTo16   = `SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter`
)

func (b *bench) serverWork(ctx context.Context) (w serverWork, err error) {
	q := checkpointsTo16
	if b.serverVersion >= 170000 {
		q = checkpointsFrom17
	}
	if err := b.pool.QueryRow(ctx, q).Scan(&w.timed, &w.requested); err != nil {
		return w, fmt.Errorf("reading checkpoints: %w", err)
	}
	if err := b.pool.QueryRow(ctx, serverWorkTables).Scan(&w.vacuums, &w.analyzes, &w.wal, &w.eventsDeleted); err != nil {
		return w, fmt.Errorf("reading autovacuum runs: %w", err)
	}
	return w, nil
}

// since returns what the server did between before and w, for a log line.
func (w serverWork) since(before serverWork) string {
	return fmt.Sprintf("checkpoints %d timed, %d requested; on outbox.events and outbox.deliveries autovacuum %d, autoanalyze %d; WAL %.1f MB",
		w.timed-before.timed, w.requested-before.requested, w.vacuums-before.vacuums, w.analyzes-before.analyzes,
		float64(w.wal-before.wal)/1e6)
}

// serverSettingsSQL reads the settings that move the figures of a run
// that writes and deletes a lot (WAL, checkpoints, memory, autovacuum),
// for results.json, with those the bench's server was started with and
// those scripts/bench.sh --server-setting changed (ALTER SYSTEM).
const serverSettingsSQL = `SELECT name, current_setting(name) FROM pg_settings
	WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'shared_buffers', 'wal_compression',
	               'full_page_writes', 'max_wal_size', 'checkpoint_timeout', 'checkpoint_completion_target',
	               'wal_buffers', 'wal_writer_delay', 'autovacuum', 'data_checksums')
	   OR source = 'command line' OR sourcefile LIKE '%postgresql.auto.conf'
	ORDER BY name`

// serverSettings returns serverSettingsSQL's settings, by name.
func (b *bench) serverSettings(ctx context.Context) (map[string]string, error) {
	rows, err := b.pool.Query(ctx, serverSettingsSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the server's settings: %w", err)
	}
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, fmt.Errorf("reading the server's settings: %w", err)
		}
		out[name] = value
	}
	return out, rows.Err()
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

// activitySQL samples what the server's processes are doing: every
// backend but idle client sessions and this one, with its wait and the
// start of its statement, and the WAL position.
const activitySQL = `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, coalesce(string_agg(
		backend_type || ':' || coalesce(wait_event_type || '/' || wait_event, 'cpu') || ':' ||
		coalesce(replace(left(query, 40), E'\n', ' '), ''), ' | ' ORDER BY backend_type, pid), '')
	FROM pg_stat_activity
	WHERE pid <> pg_backend_pid() AND (state IS NULL OR state <> 'idle')
	  AND backend_type NOT IN ('background writer', 'logical replication launcher', 'autovacuum launcher')
	  AND NOT (backend_type = 'checkpointer' AND wait_event = 'CheckpointerMain')
	  AND NOT (backend_type = 'walwriter' AND wait_event = 'WalWriterMain')`

// sampleActivity writes, every 50 ms until the returned function is called,
// a CSV line (wall time, WAL bytes since the last sample, what the server's
// processes do) to name: with --latency-trace, the growth phase's stream
// runs, with retention and without it, keep one beside the stream's
// latencies, to read a stall against what the server did then.
func (b *bench) sampleActivity(ctx context.Context, name string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lines []string
		var last int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var wal int64
			var what string
			if err := b.pool.QueryRow(ctx, activitySQL).Scan(&wal, &what); err == nil {
				if last > 0 {
					lines = append(lines, fmt.Sprintf("%s,%d,%q", time.Now().UTC().Format("15:04:05.000"), wal-last, what))
				}
				last = wal
			}
			select {
			case <-ctx.Done():
				if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					fmt.Fprintf(os.Stderr, "writing %s: %v\n", name, err)
				}
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
