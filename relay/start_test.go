package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// insertTagged commits n events on topic orders whose payload says which
// phase of the test wrote them.
func (b *testBundle) insertTagged(t *testing.T, phase string, n int) {
	t.Helper()
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || (s % 20), jsonb_build_object('phase', $1::text, 's', s) FROM generate_series(1, $2) AS s`,
		phase, n)
}

// expectEveryEventOnceOnKafka waits for every event to be SENT and checks
// each is on Kafka exactly once.
func (b *testBundle) expectEveryEventOnceOnKafka(t *testing.T, within time.Duration) int {
	t.Helper()
	total := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.events`)
	b.waitStatus(t, "SENT", total, within)
	seen := map[string]int{}
	for _, rec := range kafkatest.Consume(t, b.brokers, total, 60*time.Second, "orders") {
		id, _ := header(rec, kafka.HeaderEventID)
		seen[id]++
	}
	dups := 0
	for id, n := range seen {
		if n > 1 {
			dups++
			if dups <= 3 {
				t.Errorf("event %s is on Kafka %d times", id, n)
			}
		}
	}
	if len(seen) != total || dups > 0 {
		t.Fatalf("%d distinct events on Kafka (%d more than once), want each of %d once", len(seen), dups, total)
	}
	return total
}

func TestStart_EventsCommittedBeforeTheSlotExistsAreBackfilledNotLeftToTheGapSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	const backlog = 100000
	b.insertTagged(t, "backlog", backlog)
	// A transaction open when the slot is created: creating the slot waits
	// for it, and events committed meanwhile are not in the stream either.
	held, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := held.Exec(ctx, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"phase": "held"}')`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg := b.config(t) // the gap sweep's grace stays 5 minutes: it cannot be what delivers
	b.run(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "slot being created", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, b.slot)
		return n == 1, "no slot yet"
	})
	b.insertTagged(t, "during", 5)
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitStreaming(t, cfg)
	b.insertTagged(t, "after", 5)
	total := b.expectEveryEventOnceOnKafka(t, 3*time.Minute)
	var backfilled int
	if err := b.pool.QueryRow(ctx, `SELECT events FROM outbox.slot_backfills WHERE slot_name = $1`, b.slot).Scan(&backfilled); err != nil {
		t.Fatal(err)
	}
	if backfilled != backlog+1+5 {
		t.Errorf("backfilled %d events, want the %d committed before the slot was consistent", backfilled, backlog+1+5)
	}
	t.Logf("%d events (%d backfilled) each on Kafka once, %s after start", total, backfilled, time.Since(start).Round(time.Millisecond))
}

func TestStart_ASlotDroppedWhileTheRelayIsDownIsCreatedAgainAndBackfilled(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	b.deliverThenStop(t, cfg)
	b.exec(t, `SELECT pg_drop_replication_slot($1)`, b.slot)
	b.insertTagged(t, "while down", 20)
	b.startRelay(t, cfg)
	b.insertTagged(t, "after", 20)
	b.expectEveryEventOnceOnKafka(t, 30*time.Second)
}

// deliverThenStop runs a relay until 20 events are SENT, then stops it,
// leaving its slot behind.
func (b *testBundle) deliverThenStop(t *testing.T, cfg relay.Config) {
	t.Helper()
	stop := b.startRelay(t, cfg)
	b.insertTagged(t, "before", 20)
	b.waitStatus(t, "SENT", 20, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// invalidate generates WAL until PostgreSQL invalidates the (inactive) slot.
func invalidate(t *testing.T, pool *pgxpool.Pool, slot string) {
	t.Helper()
	pgtest.Eventually(t, 60*time.Second, "slot invalidated", func() (bool, string) {
		for _, sql := range []string{
			`CREATE TABLE IF NOT EXISTS filler (n int, pad text)`,
			`INSERT INTO filler SELECT g, repeat('x', 500) FROM generate_series(1, 5000) AS g`,
			`SELECT pg_switch_wal()`, `CHECKPOINT`,
		} {
			if _, err := pool.Exec(context.Background(), sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		var status string
		_ = pool.QueryRow(context.Background(), `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`,
			slot).Scan(&status)
		return status == "lost", "wal_status " + status
	})
}

func TestStart_AnInvalidatedSlotStopsTheRelayOrIsCreatedAgainAndBackfilled(t *testing.T) {
	t.Parallel()
	// A server of its own: a low max_slot_wal_keep_size would invalidate the
	// slots of other tests. 1 MB WAL segments keep it quick.
	dbURL := pgtest.Cluster(t, []string{"--wal-segsize=1"}, "max_slot_wal_keep_size=1MB", "min_wal_size=2MB", "max_wal_size=4MB")
	pgtest.Migrate(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	c := kafkatest.Cluster(t, kfake.SeedTopics(3, "orders"))
	b := &testBundle{dbURL: dbURL, slot: "invalidated", pool: pool, cluster: c, brokers: c.ListenAddrs()}
	cfg := b.config(t)
	b.deliverThenStop(t, cfg)
	b.insertTagged(t, "while down", 20)
	invalidate(t, pool, b.slot)

	exitCfg := cfg
	exitCfg.OnInvalidSlot = relay.InvalidSlotExit
	took, err := runUntilError(t, exitCfg, 30*time.Second)
	if !errors.Is(err, cdc.ErrSlotInvalid) || !relay.IsSetup(err) || !strings.Contains(err.Error(), "--on-invalid-slot=recreate") {
		t.Fatalf("with --on-invalid-slot=exit: %v (after %s); want the invalidated slot named with what to do", err, took)
	}
	t.Logf("--on-invalid-slot=exit stopped after %s: %v", took.Round(time.Millisecond), err)

	cfg.Logger = zaptest.NewLogger(t)
	b.startRelay(t, cfg) // the default, recreate
	b.insertTagged(t, "after", 20)
	b.expectEveryEventOnceOnKafka(t, 60*time.Second)
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND wal_status <> 'lost'`, b.slot); n != 1 {
		t.Fatalf("the slot was not created again (%d healthy slots named %s)", n, b.slot)
	}
}

func TestStart_ABackfillThatDidNotFinishIsDoneAgainFromANewSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	// What a relay killed during its backfill leaves: the slot, a started
	// backfill, events without a row.
	b.insertTagged(t, "before the slot", 30)
	b.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, b.slot)
	b.exec(t, `INSERT INTO outbox.slot_backfills (slot_name) VALUES ($1)`, b.slot)
	b.startRelay(t, b.config(t))
	b.insertTagged(t, "after", 10)
	b.expectEveryEventOnceOnKafka(t, 30*time.Second)
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.slot_backfills WHERE slot_name = $1 AND finished_at IS NOT NULL
		AND events = 30`, b.slot); n != 1 {
		t.Fatal("the backfill is not recorded as finished with the 30 events")
	}
}

func TestStart_AStandbyWaitsQuietlyAndTakesOverWhenTheSlotIsFree(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	stopActive := b.startRelay(t, cfg)
	standbyCfg := cfg
	standbyCfg.Poll.InstanceID = "standby"
	b.run(t, standbyCfg)
	b.insertTagged(t, "active", 20)
	b.waitStatus(t, "SENT", 20, 30*time.Second)
	if err := stopActive(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	b.waitStreamingWithin(t, cfg, 10*time.Second)
	t.Logf("the standby streams %s after the active relay stopped", time.Since(stopped).Round(time.Millisecond))
	b.insertTagged(t, "standby", 20)
	b.expectEveryEventOnceOnKafka(t, 30*time.Second)
}

// A relay stopped while it opens its stream stops cleanly: Run returns nil,
// as for a stop at any other moment, not the error of the statement the
// stop cut short. Creating a slot waits for every transaction that holds a
// transaction id; one left open keeps the relay there.
func TestStart_AStopWhileTheSlotIsBeingCreatedIsAStopNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	ctx := context.Background()
	open, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback(ctx) //nolint:errcheck // only held open
	if _, err := open.Exec(ctx, `INSERT INTO outbox.events (topic, payload) VALUES ('orders', '{}')`); err != nil {
		t.Fatal(err)
	}
	stop := b.run(t, b.config(t))
	pgtest.Eventually(t, 30*time.Second, "the relay creating its slot", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'walsender' AND datname = current_database() AND query LIKE 'CREATE_REPLICATION_SLOT%'`)
		return n == 1, fmt.Sprintf("%d walsenders creating a slot", n)
	})
	if err := stop(); err != nil {
		t.Fatalf("stopped while creating its slot: Run returned %v, want nil", err)
	}
}

// PostgreSQL 18 invalidates a slot left inactive for longer than
// idle_replication_slot_timeout: the relay names the setting, then creates
// the slot again and backfills, losing nothing.
func TestStart_ASlotInvalidatedForIdlingIsNamedAndCreatedAgain(t *testing.T) {
	t.Parallel()
	if major := pgtest.Major(t); major < 18 {
		t.Skipf("idle_replication_slot_timeout is PostgreSQL 18's; this is %d", major)
	}
	dbURL := pgtest.Cluster(t, nil, "idle_replication_slot_timeout=1s")
	pgtest.Migrate(t, dbURL)
	pool := pgtest.Pool(t, dbURL)
	c := kafkatest.Cluster(t, kfake.SeedTopics(3, "orders"))
	b := &testBundle{dbURL: dbURL, slot: "idled", pool: pool, cluster: c, brokers: c.ListenAddrs()}
	cfg := b.config(t)
	b.deliverThenStop(t, cfg)
	b.insertTagged(t, "while down", 20)
	pgtest.Eventually(t, 30*time.Second, "the slot invalidated for idling", func() (bool, string) {
		if _, err := pool.Exec(context.Background(), `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
		n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1
			AND invalidation_reason = 'idle_timeout'`, b.slot)
		return n == 1, "not yet"
	})

	exitCfg := cfg
	exitCfg.OnInvalidSlot = relay.InvalidSlotExit
	_, err := runUntilError(t, exitCfg, 30*time.Second)
	if !errors.Is(err, cdc.ErrSlotInvalid) || !strings.Contains(err.Error(), "idle_replication_slot_timeout") {
		t.Fatalf("got %v; want the invalidated slot with the setting that did it", err)
	}
	b.startRelay(t, cfg)
	b.insertTagged(t, "after", 20)
	b.expectEveryEventOnceOnKafka(t, 60*time.Second)
}

func TestStart_OverTLSWithVerifyFullEveryConnectionIsEncryptedAndAWrongCAIsASetupError(t *testing.T) {
	t.Parallel()
	certs := kafkatest.NewMutualTLS(t) // a CA and a server certificate for 127.0.0.1
	dbURL := pgtest.TLSCluster(t, certs.ServerCertFile, certs.ServerKeyFile)
	pgtest.Migrate(t, dbURL)
	c := kafkatest.Cluster(t, kfake.SeedTopics(1, "orders"))
	b := &testBundle{dbURL: dbURL, slot: "tls", pool: pgtest.Pool(t, dbURL), cluster: c, brokers: c.ListenAddrs()}
	verifyFull := func(ca string) string {
		return strings.Replace(pgtest.RelayURL(dbURL), "sslmode=disable", "sslmode=verify-full&sslrootcert="+ca, 1)
	}

	cfg := b.config(t)
	cfg.DatabaseURL = verifyFull(certs.CAFile)
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{"n": 1}')`)
	b.waitStatus(t, "SENT", 1, 30*time.Second)
	// The stream, the poller and the status writer: all encrypted.
	plain := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
		WHERE a.usename = $1 AND NOT s.ssl`, pgtest.RelayRole)
	walsender := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid)
		WHERE r.usename = $1 AND s.ssl`, pgtest.RelayRole)
	if plain != 0 || walsender != 1 {
		t.Errorf("%d connections of the relay in plain text, %d encrypted walsenders; want 0 and 1", plain, walsender)
	}

	other := kafkatest.NewMutualTLS(t) // another CA, which did not sign the server's certificate
	cfg = b.config(t)
	cfg.Slot, cfg.DatabaseURL = "tls_wrong_ca", verifyFull(other.CAFile)
	took, err := runUntilError(t, cfg, 30*time.Second)
	t.Logf("a wrong CA: %v", err)
	if !relay.IsSetup(err) || !strings.Contains(fmt.Sprint(err), "certificate") {
		t.Fatalf("after %s: %v; want a setup error about the server's certificate", took, err)
	}
}
