package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/relay"
)

// A mapped table that keeps its rows and has its order columns is walked
// by the paths that do not read the stream (the backfill of a new slot,
// the gap sweep, poll mode) with per-key order as outbox.events is: each
// check reads topic orders back and requires each key's events in the
// order they were written (their payload's seq).

// orderedTable creates public.app_outbox, with rows from before its order
// columns (seq 0: never relayed), gives it its order columns as `migrate`
// does and returns its mapping.
func (b *testBundle) orderedTable(t *testing.T) []*mapping.Table {
	t.Helper()
	b.exec(t, `CREATE TABLE public.app_outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		aggregate text NOT NULL, body jsonb NOT NULL)`)
	b.exec(t, `INSERT INTO public.app_outbox (aggregate, body) VALUES ('k0', '{"seq": 0}'), ('k1', '{"seq": 0}')`)
	tables, err := mapping.ParseTables("tables.json", []byte(`{"tables": [{"table": "public.app_outbox", "id": "id",
		"key": "aggregate", "payload": "body", "topic": "orders"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range tables[0].OrderSQL() {
		b.exec(t, stmt)
	}
	return b.mapped(t, tables)
}

// writeMapped writes rows with seq from .. from+n-1 to public.app_outbox,
// txn rows per transaction, over three keys.
func (b *testBundle) writeMapped(t *testing.T, from, n, txn int) {
	t.Helper()
	for s := from; s < from+n; s += txn {
		b.exec(t, `INSERT INTO public.app_outbox (aggregate, body)
			SELECT 'k' || s % 3, jsonb_build_object('seq', s) FROM generate_series($1::int, $2::int) s`,
			s, min(s+txn, from+n)-1)
	}
}

// mappedWorkload writes one transaction of 1,000 rows and then 200 of one
// row each from seq from on, and returns the next seq.
func (b *testBundle) mappedWorkload(t *testing.T, from int) int {
	t.Helper()
	b.writeMapped(t, from, 1000, 1000)
	b.writeMapped(t, from+1000, 200, 1)
	return from + 1200
}

// slotGapWorkload runs a relay with cfg until 10 rows are SENT, stops it,
// calls lose (the slot is lost) and writes the workload from seq 11 on
// while no relay runs. It returns the next seq.
func (b *testBundle) slotGapWorkload(t *testing.T, cfg relay.Config, lose func()) int {
	t.Helper()
	stop := b.startRelay(t, cfg)
	b.writeMapped(t, 1, 10, 1)
	b.waitStatus(t, "SENT", 10, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lose()
	return b.mappedWorkload(t, 11)
}

func TestMappedWalk_ANewSlotBackfillsATableWithOrderColumnsInInsertionOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	tables := b.orderedTable(t)
	next := b.mappedWorkload(t, 1)
	cfg := b.config(t)
	cfg.Tables = tables
	b.run(t, cfg)
	// Streamed while the backfill may still run: they must not overtake
	// what it finds.
	b.writeMapped(t, next, 100, 1)
	b.checkInOrder(t, next+99) // the two rows from before the order columns: not relayed
}

func TestMappedWalk_RowsWrittenWhileTheSlotWasGoneGoOutInInsertionOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	cfg.Tables = b.orderedTable(t)
	next := b.slotGapWorkload(t, cfg, func() { b.exec(t, `SELECT pg_drop_replication_slot($1)`, b.slot) })
	b.run(t, cfg)
	b.writeMapped(t, next, 100, 1)
	b.checkInOrder(t, next+99)
}

func TestMappedWalk_TheGapSweepDeliversRowsTheStreamNeverSaw(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	tables := b.orderedTable(t)
	cfg := b.config(t)
	cfg.Tables = tables
	cfg.Poll.GapGrace = 100 * time.Millisecond
	cfg.Poll.Interval = 20 * time.Millisecond
	b.startRelay(t, cfg)
	b.writeMapped(t, 1, 10, 1)
	b.waitStatus(t, "SENT", 10, 30*time.Second)
	// Out of the publication for a while: the stream never sees these.
	b.exec(t, `ALTER PUBLICATION outbox_relay DROP TABLE public.app_outbox`)
	b.writeMapped(t, 11, 300, 100)
	b.exec(t, `ALTER PUBLICATION outbox_relay ADD TABLE public.app_outbox`)
	b.writeMapped(t, 311, 50, 1)
	// Nothing lost. (Order cannot hold here: the stream delivered the
	// later rows before the sweep found the earlier ones, as it does for
	// outbox.events.)
	b.waitStatus(t, "SENT", 360, 60*time.Second)
	seen := map[int]bool{}
	for _, r := range kafkatest.Consume(t, b.brokers, 360, 30*time.Second, "orders") {
		seen[seqOf(r)] = true
	}
	if len(seen) != 360 || seen[0] {
		t.Fatalf("%d distinct events on Kafka (seq 0 among them: %v), want 360 from seq 1", len(seen), seen[0])
	}
}

func TestMappedWalk_PollModeRelaysATableWithOrderColumnsInInsertionOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	tables := b.orderedTable(t)
	next := b.mappedWorkload(t, 1)
	cfg := b.config(t)
	cfg.Tables = tables
	cfg.Mode = relay.ModePoll
	cfg.Poll.BatchSize = 97 // pages cut through the big transaction
	cfg.Poll.Interval = 10 * time.Millisecond
	cfg.Poll.GapGrace = 100 * time.Millisecond
	b.startPoller(t, cfg)
	b.writeMapped(t, next, 100, 1)
	b.checkInOrder(t, next+99)
}

func TestMappedWalk_PollModeRefusesATableWithoutOrderColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, debeziumTable)
	d, err := mapping.LoadDebezium("../internal/mapping/testdata/outbox-connector.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config(t)
	cfg.Tables = d.Tables
	cfg.Mode = relay.ModePoll
	if err := runToError(t, cfg); !relay.IsSetup(err) || !strings.Contains(fmt.Sprint(err), "outbox_created_at and outbox_seq") ||
		!strings.Contains(fmt.Sprint(err), "outbox-relay migrate --debezium-config") {
		t.Fatalf("Run = %v, want a setup error naming the order columns and migrate", err)
	}
}

// A failover to a standby without the relay's slot: the relay creates it
// anew there and backfills the mapped rows the primary's relay never
// delivered, in insertion order.
func TestMappedWalk_ARelayStartedOnAPromotedStandbyDeliversInInsertionOrder(t *testing.T) {
	t.Parallel()
	b, failover := failoverPair(t)
	cfg := b.config(t)
	cfg.Tables = b.orderedTable(t)
	next := b.slotGapWorkload(t, cfg, func() {})
	sb := failover()
	scfg := sb.config(t)
	scfg.Tables = cfg.Tables
	sb.run(t, scfg)
	sb.writeMapped(t, next, 100, 1)
	sb.checkInOrder(t, next+99)
}

// A table that keeps its rows outlives their status rows (--retention
// deletes those): the backfill does not take rows older than the retention
// for rows the relay missed.
func TestMappedWalk_RowsOlderThanTheRetentionAreNotSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	cfg.Tables = b.orderedTable(t)
	cfg.Retention = 7 * 24 * time.Hour
	b.exec(t, `INSERT INTO public.app_outbox (aggregate, body, outbox_created_at)
		SELECT 'k' || s % 3, '{"seq": 0}', now() - interval '10 days' FROM generate_series(1, 5) s`)
	next := b.mappedWorkload(t, 1)
	b.run(t, cfg)
	b.checkInOrder(t, next-1) // seq 0 on Kafka would be one distinct event too many
}
