package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func TestRelay_GracefulStopAndRestartDeliversEverythingExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	cfg.BatchSize = 50 // many batches in flight when the stop comes

	const rounds, perRound = 3, 2000
	for round := 0; round < rounds; round++ {
		stop := b.startRelay(t, cfg)
		// A transaction per round big enough to be mid-flight at stop time.
		b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (s % 10), jsonb_build_object('round', $1::int, 's', s)
			FROM generate_series(1, $2) AS s`, round, perRound)
		if err := stop(); err != nil {
			t.Fatalf("round %d: graceful stop returned %v", round, err)
		}
	}
	b.startRelay(t, cfg)
	b.waitStatus(t, "SENT", rounds*perRound, 60*time.Second)

	b.expectEachEventOnce(t, rounds*perRound, "orders")
}

// expectEachEventOnce reads the topic and fails unless it holds n distinct
// events, none of them twice.
func (b *testBundle) expectEachEventOnce(t *testing.T, n int, topic string) {
	t.Helper()
	recs := kafkatest.Consume(t, b.brokers, n, 30*time.Second, topic)
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, kafka.HeaderEventID)
		seen[id]++
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if len(seen) != n || dups != 0 {
		t.Fatalf("Kafka has %d distinct events and %d duplicates; want %d and 0", len(seen), dups, n)
	}
}

func TestRelay_QuietOutboxBesideBusyTableKeepsConfirmingTheSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.exec(t, `CREATE TABLE busy (id bigserial PRIMARY KEY, v text)`)
	b.startRelay(t, b.config(t))

	slotLSN := func() pglogrepl.LSN {
		var s string
		if err := b.pool.QueryRow(context.Background(),
			`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, b.slot).Scan(&s); err != nil {
			t.Fatal(err)
		}
		l, _ := pglogrepl.ParseLSN(s)
		return l
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 20; j++ {
			b.exec(t, `INSERT INTO busy (v) SELECT repeat('x', 500) FROM generate_series(1, 200)`)
		}
		var cur string
		if err := b.pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&cur); err != nil {
			t.Fatal(err)
		}
		target, _ := pglogrepl.ParseLSN(cur)
		pgtest.Eventually(t, 30*time.Second, "slot confirmed past the busy table's writes", func() (bool, string) {
			got := slotLSN()
			return got >= target, fmt.Sprintf("confirmed_flush_lsn %s, WAL written to %s", got, target)
		})
	}
}

func TestRelay_ReplayedEventsThatHaveAStatusRowAreNotPublishedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	// A second slot, created before any event: a relay on it replays
	// everything, as after a crash that kept the slot from moving.
	behind := b.slot + "_behind"
	b.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, behind)
	insert := func(round, n int) {
		b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (s % 10), jsonb_build_object('round', $1::int, 's', s)
			FROM generate_series(1, $2) AS s`, round, n)
	}

	stop := b.startRelay(t, b.config(t))
	insert(0, 500)
	b.waitStatus(t, "SENT", 500, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Committed while no relay runs: replayed too, but without a status row.
	insert(1, 300)

	cfg := b.config(t)
	cfg.Slot = behind
	b.startRelay(t, cfg)
	b.waitStatus(t, "SENT", 800, 60*time.Second)

	b.expectEachEventOnce(t, 800, "orders")
}
