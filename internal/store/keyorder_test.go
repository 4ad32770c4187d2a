package store_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// claimAll claims batch by batch until nothing is due, marking each batch
// SENT, and returns the payload "n" of every claimed event in claim order.
// A claim that takes nothing while rows are still PENDING fails the test.
func claimAll(t *testing.T, st *store.Store, batch int, hold bool) []int {
	t.Helper()
	ctx := context.Background()
	var order []int
	for {
		c, err := st.Claim(ctx, "me", batch, hold)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(c.Rows) == 0 {
			return order
		}
		n := c.Events.ColumnIndex("n")
		if n < 0 {
			t.Fatal("the claimed events have no column n")
		}
		var o store.Outcomes
		for _, r := range c.Rows {
			order = append(order, int(binary.BigEndian.Uint32(r.Values[n])))
			var id [16]byte
			copy(id[:], r.Values[c.Events.ColumnIndex("id")])
			o.Add(store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, MaxAttempts: 5})
		}
		if err := st.RecordOutcomes(ctx, "me", &o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClaim_AKeyWhoseFirstRowIsDueAfterTheRestStillMovesInInsertionOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	if _, err := pool.Exec(ctx, `ALTER TABLE outbox.events ADD COLUMN n integer`); err != nil {
		t.Fatal(err)
	}
	// Three times the batch of one key, written in one transaction with
	// application-chosen random ids, queued without a commit position (as
	// the sweep or a backfill queues them). The first row was queued last:
	// its next_attempt_at is later than every other row's, though all are
	// due.
	const batch, n = 100, 300
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (id, topic, key, payload, n)
		SELECT gen_random_uuid(), 'orders', 'k', '{}', i FROM generate_series(1, $1::int) i`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, next_attempt_at, topic, key, commit_lsn, tx_position, seq)
		SELECT id, 'PENDING', CASE WHEN n = 1 THEN now() - interval '1 second' ELSE now() - interval '1 hour' END,
		       topic, key, '0/0', 0, seq FROM outbox.events`); err != nil {
		t.Fatal(err)
	}
	order := claimAll(t, store.New(pool), batch, false)
	if len(order) != n {
		t.Fatalf("claimed %d of %d events; the rest stayed PENDING behind a first row outside the batch", len(order), n)
	}
	for i, got := range order {
		if got != i+1 {
			t.Fatalf("claim %d was event %d, want %d: not in insertion order", i, got, i+1)
		}
	}
}
