package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// Per-key order on the paths that do not know an event's commit position:
// every check reads the topic back per partition, in offset order, and
// requires each key's events (first copies; duplicates are allowed) in the
// order they were written (their payload's seq).

// eachIDMode runs test, in parallel, with each of the two ways
// applications give events ids: the default (outbox.uuid_v7(), random below
// the millisecond) and their own random version 4 uuids. id is the SQL for
// a new event's id.
func eachIDMode(t *testing.T, test func(t *testing.T, id string)) {
	t.Parallel()
	for _, m := range []struct{ name, id string }{
		{"default ids", "outbox.uuid_v7()"}, {"application v4 ids", "gen_random_uuid()"},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			test(t, m.id)
		})
	}
}

// writeKey writes events seq from .. from+n-1 on topic orders, key k:
// txn events per transaction. pad is the first event's payload padding.
func (b *testBundle) writeKey(t *testing.T, id string, from, n, txn int) {
	t.Helper()
	for s := from; s < from+n; s += txn {
		b.exec(t, `INSERT INTO outbox.events (id, topic, key, payload)
			SELECT `+id+`, 'orders', 'k', jsonb_build_object('seq', s) FROM generate_series($1::int, $2::int) s`,
			s, min(s+txn, from+n)-1)
	}
}

// writeOrderWorkload writes the workload from seq from on: one
// transaction of 1,000 events, then 200 one-event transactions. It returns
// the next seq.
func (b *testBundle) writeOrderWorkload(t *testing.T, id string, from int) int {
	t.Helper()
	b.writeKey(t, id, from, 1000, 1000)
	b.writeKey(t, id, from+1000, 200, 1)
	return from + 1200
}

// checkInOrder waits for n SENT rows (retries allowed) and checks that the
// n events are on Kafka, each key in order.
func (b *testBundle) checkInOrder(t *testing.T, n int) {
	t.Helper()
	b.waitStatus(t, "SENT", n, 60*time.Second)
	recs := b.onKafkaInOrder(t, n)
	t.Logf("%d events (%d records) on Kafka in insertion order per key", n, recs)
}

func TestOrder_TheBackfillAtFirstStartDeliversInInsertionOrder(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		next := b.writeOrderWorkload(t, id, 1)
		b.run(t, b.config(t))
		// Streamed while the backfill may still run: they must not
		// overtake what it finds.
		b.writeKey(t, id, next, 100, 1)
		b.checkInOrder(t, next+99)
	})
}

func TestOrder_TwoPollersDeliverInInsertionOrder(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		b.writeKey(t, id, 1, 1000, 1000)
		for i := range 2 {
			cfg := b.config(t)
			cfg.Mode = relay.ModePoll
			cfg.Poll.BatchSize = 7 + 6*i // the two claim across each other
			cfg.Poll.Interval = 10 * time.Millisecond
			cfg.Poll.GapGrace = 100 * time.Millisecond
			cfg.Poll.InstanceID = fmt.Sprintf("poller-%d", i)
			b.run(t, cfg)
		}
		b.writeKey(t, id, 1001, 200, 1)
		b.writeKey(t, id, 1201, 1000, 1000)
		b.checkInOrder(t, 2200)
	})
}

func TestOrder_EventsWrittenWhileTheSlotWasGoneGoOutInInsertionOrder(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		cfg := b.config(t)
		cfg.Poll.GapGrace = 100 * time.Millisecond
		stop := b.startRelay(t, cfg)
		b.writeKey(t, id, 1, 10, 1)
		b.waitStatus(t, "SENT", 10, 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		b.exec(t, `SELECT pg_drop_replication_slot($1)`, b.slot)
		next := b.writeOrderWorkload(t, id, 11)
		b.run(t, cfg)
		b.writeKey(t, id, next, 100, 1)
		b.checkInOrder(t, next+99)
	})
}

func TestOrder_AHeldKeyGoesOutInInsertionOrderOnceItsFailedFirstEventIsResent(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		setTopicMaxBytes(t, b.brokers, "orders", 2000)
		cfg := b.config(t)
		cfg.FailedKeyPolicy = relay.FailedKeyHold
		cfg.Poll.Interval = 20 * time.Millisecond
		// The key's first event is too big for the topic: FAILED.
		var head string
		if err := b.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (id, topic, key, payload)
			VALUES (`+id+`, 'orders', 'k', jsonb_build_object('seq', 0, 'pad', repeat('x', 5000))) RETURNING id::text`).
			Scan(&head); err != nil {
			t.Fatal(err)
		}
		stop := b.run(t, cfg)
		if r := b.waitFor(t, head, "FAILED"); r.reason != relay.ReasonMessageTooLarge {
			t.Fatalf("first event: %+v, want FAILED MESSAGE_TOO_LARGE", r)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// The rest are written while the slot is gone: the next start
		// backfills them, without a commit position, behind the held
		// first event.
		b.exec(t, `SELECT pg_drop_replication_slot($1)`, b.slot)
		next := b.writeOrderWorkload(t, id, 1)
		b.run(t, cfg)
		pgtest.Eventually(t, 30*time.Second, "the key held with the rest queued", func() (bool, string) {
			n := pgtest.Count(t, b.pool, `SELECT coalesce(sum(queued), 0)::int FROM outbox.held_keys WHERE blocking_event_id = $1`, head)
			return n == next-1, fmt.Sprintf("%d queued behind it, want %d; %s", n, next-1, b.statusCounts(t))
		})
		if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); n != 0 {
			t.Fatalf("%d events of the held key SENT before its first", n)
		}
		setTopicMaxBytes(t, b.brokers, "orders", 1<<20)
		b.exec(t, `SELECT outbox.resend($1)`, head)
		b.checkInOrder(t, next)
	})
}

// A key with three times the poll batch queued, its first row queued last
// (a later next_attempt_at than every other, all due), is delivered in full
// and in order, by a poll-only relay and by a streaming one.
func TestOrder_AKeyWhoseFirstQueuedRowIsDueLastIsDeliveredInOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{relay.ModePoll, relay.ModeStream} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(3, "orders"))
			const batch = 50
			b.writeKey(t, "gen_random_uuid()", 1, 3*batch, 3*batch)
			b.exec(t, `INSERT INTO outbox.deliveries (event_id, status, next_attempt_at, topic, key, commit_lsn, tx_position, seq)
				SELECT id, 'PENDING', CASE WHEN (payload->>'seq')::int = 1 THEN now() - interval '1 second'
				                          ELSE now() - interval '1 hour' END, topic, key, '0/0', 0, seq
				FROM outbox.events`)
			cfg := b.config(t)
			cfg.Mode = mode
			cfg.Poll.BatchSize = batch
			cfg.Poll.Interval = 20 * time.Millisecond
			b.run(t, cfg)
			b.writeKey(t, "gen_random_uuid()", 3*batch+1, 20, 1)
			b.checkInOrder(t, 3*batch+20)
		})
	}
}

// Events already in the outbox when --mode switches from poll to stream and
// back keep their order.
func TestOrder_SwitchingModeKeepsTheOrderOfQueuedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	next := b.writeOrderWorkload(t, "gen_random_uuid()", 1)
	total := next - 1
	for i, mode := range []string{relay.ModePoll, relay.ModeStream, relay.ModePoll} {
		cfg := b.config(t)
		cfg.Mode = mode
		cfg.Poll.BatchSize = 10
		cfg.Poll.Interval = 20 * time.Millisecond
		cfg.Poll.GapGrace = 100 * time.Millisecond
		stop := b.run(t, cfg)
		sent := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		b.waitStatus(t, "SENT", sent+100, 30*time.Second) // some, not all: stop in the middle
		b.writeKey(t, "gen_random_uuid()", next, 300, 100)
		next += 300
		total += 300
		if i < 2 {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.checkInOrder(t, total)
}

// After a failover to a promoted physical standby (PostgreSQL 15 keeps no
// logical slot there), the relay creates its slot anew and backfills what
// the primary's relay never delivered: in insertion order.
func TestOrder_ARelayStartedOnAPromotedStandbyDeliversInInsertionOrder(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b, failover := failoverPair(t)
		stop := b.startRelay(t, b.config(t))
		b.writeKey(t, id, 1, 10, 1)
		b.waitStatus(t, "SENT", 10, 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// Written on the primary and replicated; its relay is gone.
		next := b.writeOrderWorkload(t, id, 11)
		sb := failover()
		sb.run(t, sb.config(t))
		sb.writeKey(t, id, next, 100, 1)
		sb.checkInOrder(t, next+99)
	})
}

// failoverPair starts a migrated primary of its own with a physical
// standby (no logical slot there), and returns the primary's bundle and
// failover, which waits until the standby has replayed everything written
// so far, promotes it and returns its bundle (same Kafka, same slot name).
func failoverPair(t *testing.T) (*testBundle, func() *testBundle) {
	t.Helper()
	ctx := context.Background()
	primary := pgtest.Cluster(t, nil)
	pgtest.Migrate(t, primary)
	standbyURL, _, promote := pgtest.Standby(t, primary)
	pool := pgtest.Pool(t, primary) // Standby restarted the primary: a pool of its own
	c := kafkatest.Cluster(t, kfake.SeedTopics(3, "orders"))
	b := &testBundle{dbURL: primary, slot: "outbox_failover", pool: pool, cluster: c, brokers: c.ListenAddrs()}
	return b, func() *testBundle {
		t.Helper()
		var end string
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
			t.Fatal(err)
		}
		sb := &testBundle{dbURL: standbyURL, slot: b.slot, pool: pgtest.Pool(t, standbyURL), cluster: c, brokers: b.brokers}
		pgtest.Eventually(t, 30*time.Second, "the standby replays the primary's writes", func() (bool, string) {
			n := pgtest.Count(t, sb.pool, `SELECT (pg_last_wal_replay_lsn() >= $1::pg_lsn)::int`, end)
			return n == 1, "not yet"
		})
		promote()
		return sb
	}
}

func TestOrder_TheStreamDoesNotOvertakeAKeyTheBackfillHasNotReachedYet(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		// Pages of other keys first: the backfill reaches key k, written
		// last, only after several pages.
		const others = 60000
		b.exec(t, `INSERT INTO outbox.events (id, topic, key, payload)
			SELECT `+id+`, 'orders', 'other-' || (s % 100), jsonb_build_object('seq', s) FROM generate_series(1, $1::int) s`, others)
		b.writeKey(t, id, others+1, 10, 10)
		cfg := b.config(t)
		b.run(t, cfg)
		b.waitStreaming(t, cfg)
		// Streamed while the backfill walks the other keys' pages: queued
		// behind k's first ten, which have no row yet.
		b.writeKey(t, id, others+11, 20, 1)
		b.checkInOrder(t, others+30)
	})
}

// queueKeyHead writes key k's first event (seq 1), queued in the table: a
// PENDING row, not attempted yet, due in two seconds.
func (b *testBundle) queueKeyHead(t *testing.T, id string) {
	t.Helper()
	b.writeKey(t, id, 1, 1, 1)
	b.exec(t, `INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, topic, key, commit_lsn, tx_position, seq)
		SELECT id, 'PENDING', 0, now() + interval '2 seconds', topic, key, '0/0', 0, seq FROM outbox.events`)
}

func TestOrder_TheBackfillQueuesAKeyBehindItsQueuedRows(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		// The backfill must not send k's next events before its first.
		b.queueKeyHead(t, id)
		b.writeKey(t, id, 2, 50, 10)
		b.exec(t, `INSERT INTO outbox.events (id, topic, key, payload)
			SELECT `+id+`, 'orders', 'other-' || (s % 10), jsonb_build_object('seq', s) FROM generate_series(100, 199) s`)
		b.run(t, b.config(t))
		b.checkInOrder(t, 151)
	})
}
