package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The run against an empty database (--growth-versus-empty): is the stream
// at 1,000/s as fast with outbox.deliveries at n rows as at none? Sizes are
// filled minutes apart, and two runs of the same stream differ here by up
// to 2.7 times, so a size's runs against another's compare the machine's
// minutes as much as the table. In this run two relays stream at once, one
// on the bench's database (the size's rows) and one on an empty database
// of the same server, migrated as the other, and the writer writes its
// blocks of interleaveBlock to each in turn (the filled one on: on, off,
// off, on...): the same minutes, the same processes busy, the same server;
// only the tables differ.
const versusDatabase = "outbox_bench_empty"

// streamVersusEmpty runs the stream for d (whole blocks) against the
// filled database and an empty one, and drops the empty one after.
func (b *bench) streamVersusEmpty(ctx context.Context, d time.Duration) (Blocks, error) {
	blocks := wholeBlocks(d)
	res := Blocks{Seconds: (time.Duration(blocks) * interleaveBlock).Seconds()}
	emptyURL, err := withDatabase(b.o.dbURL, versusDatabase)
	if err != nil {
		return res, err
	}
	if err := b.emptyDatabase(ctx, emptyURL); err != nil {
		return res, err
	}
	defer func() {
		if err := b.exec(context.WithoutCancel(ctx), `DROP DATABASE IF EXISTS `+versusDatabase+` WITH (FORCE)`); err != nil {
			fmt.Fprintf(os.Stderr, "growth: WARNING: could not drop %s (drop it, and any slot in it, by hand): %v\n", versusDatabase, err)
		}
	}()
	if err := b.freshSlot(ctx, "bench_steady"); err != nil {
		return res, err
	}
	defer b.dropSlot(ctx, "bench_steady")
	empty, err := pgxpool.New(ctx, emptyURL)
	if err != nil {
		return res, err
	}
	defer empty.Close()
	// A logical slot belongs to the database it is made in.
	if _, err := empty.Exec(ctx, `SELECT pg_create_logical_replication_slot('bench_empty', 'pgoutput')`); err != nil {
		return res, fmt.Errorf("the empty database's slot: %w", err)
	}
	defer func() {
		if err := dropSlotOnceIdle(context.WithoutCancel(ctx), empty, "bench_empty"); err != nil {
			fmt.Fprintf(os.Stderr, "growth: WARNING: %v\n", err)
		}
	}()
	if err := b.trimTopic(ctx); err != nil {
		return res, err
	}
	defer b.noteServerWork(ctx, "run against an empty database")()
	t0 := time.Now()
	full, err := b.startRelay("--slot", "bench_steady", "--retention", "0")
	if err != nil {
		return res, err
	}
	defer func() { _ = full.stop() }()
	other, err := b.startRelayOn(emptyURL, "--slot", "bench_empty", "--retention", "0")
	if err != nil {
		return res, err
	}
	defer func() { _ = other.stop() }()
	err = waitFor(ctx, 30*time.Second, "both relays to stream", func() (bool, error) {
		var n int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n)
		return n >= 2, err
	})
	if err != nil {
		return res, err
	}
	for _, r := range []*relayProcess{full, other} {
		if _, err := r.untilSwept(ctx, t0); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(os.Stderr, "growth: stream at 1000 events/s, %d blocks of %v, every other to an empty database\n", blocks, interleaveBlock)
	_, restore := b.measureInBlocks(blocks)
	defer restore()
	b.alternate = emptyURL
	defer func() { b.alternate = "" }()
	run, err := b.steady(ctx, 1000, full, full.pid())
	if err != nil {
		return res, err
	}
	res.split(run.timed, run.measureFrom, blocks, func(_ int, t timedLatency) bool { return !t.alt })
	return res, nil
}

// dropSlotOnceIdle drops the slot of pool's database once no walsender
// holds it: the relay's may outlive the relay a moment, and until then the
// slot cannot be dropped (nor its database).
func dropSlotOnceIdle(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	return waitFor(ctx, 30*time.Second, "slot "+slot+" to be dropped", func() (bool, error) {
		var active bool
		err := pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return true, nil
		case err != nil || active:
			return false, err
		}
		_, err = pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use: active again, or still
			return false, nil
		}
		return err == nil, err
	})
}

// emptyDatabase makes the database of url afresh, with the outbox schema.
func (b *bench) emptyDatabase(ctx context.Context, dbURL string) error {
	if err := b.exec(ctx, `DROP DATABASE IF EXISTS `+versusDatabase+` WITH (FORCE)`); err != nil {
		return err
	}
	if err := b.exec(ctx, `CREATE DATABASE `+versusDatabase); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, b.o.relayBin, "migrate")
	cmd.Env = append(os.Environ(), "OUTBOX_DATABASE_URL="+dbURL) // not on the command line: ps shows it
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("migrating %s: %w: %s", versusDatabase, err, out)
	}
	return nil
}

// withDatabase returns the URL dbURL with its database name replaced.
func withDatabase(dbURL, name string) (string, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("--growth-versus-empty needs --database-url as a postgres:// URL (database %q)", cfg.Database)
	}
	u.Path = "/" + name
	return u.String(), nil
}
