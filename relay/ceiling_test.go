package relay

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func TestReplayLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	st := store.New(pool)
	// Ten events, taken in id order.
	var ids [][16]byte
	rows, err := pool.Query(ctx, `INSERT INTO outbox.events (topic, payload)
		SELECT 't', jsonb_build_object('n', n) FROM generate_series(1, 10) AS n ORDER BY n RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id [16]byte
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil || len(ids) != 10 {
		t.Fatalf("inserted %d events: %v", len(ids), err)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	const grace = 5 * time.Minute
	// Events created at the given time, in id order.
	batchOf := func(created time.Time) *batch {
		b := &batch{}
		for _, id := range ids {
			e := event{id: id}
			e.Record.Timestamp = created
			b.events = append(b.events, e)
		}
		return b
	}
	skipped := func(b *batch) (out []int) {
		for i, e := range b.events {
			if e.skip {
				out = append(out, i)
			}
		}
		return out
	}

	t.Run("WithNoStatusRowsNothingMayHaveOne", func(t *testing.T) {
		c, err := readStatusCeiling(ctx, st, grace)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(time.Now())
		for i := range b.events {
			if c.mayHaveRow(&b.events[i], time.Now()) {
				t.Errorf("event %d may have a row, but the table is empty", i)
			}
		}
	})

	t.Run("SkipsExactlyTheEventsWithARowAndLooksUpOnlyUpToTheCeiling", func(t *testing.T) {
		// Rows for events 1 and 4 (0-based): the ceiling is event 4.
		if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status) VALUES ($1, 'SENT'), ($2, 'FAILED')`,
			ids[1], ids[4]); err != nil {
			t.Fatal(err)
		}
		c, err := readStatusCeiling(ctx, st, grace)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(time.Now())
		for i := range b.events {
			if got, want := c.mayHaveRow(&b.events[i], time.Now()), i <= 4; got != want {
				t.Errorf("event %d: mayHaveRow = %v, want %v", i, got, want)
			}
		}
		if err := c.markExisting(ctx, st, b, nil); err != nil {
			t.Fatal(err)
		}
		if got := skipped(b); len(got) != 2 || got[0] != 1 || got[1] != 4 {
			t.Fatalf("skipped events %v, want [1 4]", got)
		}
	})

	t.Run("AnyIdSchemeIsSound", func(t *testing.T) {
		// A row for an id greater than every event's (an application's own
		// random id, say): every event is then looked up.
		if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status) VALUES ('ffffffff-ffff-4fff-bfff-ffffffffffff', 'SENT'), ($1, 'SENT')`,
			ids[9]); err != nil {
			t.Fatal(err)
		}
		c, err := readStatusCeiling(ctx, st, grace)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(time.Now())
		if err := c.markExisting(ctx, st, b, nil); err != nil {
			t.Fatal(err)
		}
		if got := skipped(b); len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 9 {
			t.Fatalf("skipped events %v, want [1 4 9]", got)
		}
	})

	t.Run("EventsOldEnoughForTheGapSweepAreLookedUpWhateverTheirId", func(t *testing.T) {
		// The poller may give such an event a row at any time, after the
		// session read its ceiling.
		c := statusCeiling{sweepAge: grace / 2}
		now := time.Now()
		b := batchOf(now.Add(-grace / 2))
		for i := range b.events {
			if !c.mayHaveRow(&b.events[i], now) {
				t.Errorf("event %d, created %s ago, is not looked up", i, grace/2)
			}
		}
		b = batchOf(now.Add(-grace/2 + time.Second))
		if c.mayHaveRow(&b.events[0], now) {
			t.Errorf("an event younger than half the gap grace, with no row anywhere, is looked up")
		}
	})
}
