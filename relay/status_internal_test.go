package relay

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func TestReplayLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
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
	batchOf := func() *batch {
		b := &batch{}
		for _, id := range ids {
			b.events = append(b.events, event{id: id})
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
		c, err := readStatusCeiling(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if c.mayHaveRow(id) {
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
		c, err := readStatusCeiling(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if got, want := c.mayHaveRow(id), i <= 4; got != want {
				t.Errorf("event %d: mayHaveRow = %v, want %v", i, got, want)
			}
		}
		b := batchOf()
		if err := markExisting(ctx, pool, c, b, nil); err != nil {
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
		c, err := readStatusCeiling(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf()
		if err := markExisting(ctx, pool, c, b, nil); err != nil {
			t.Fatal(err)
		}
		if got := skipped(b); len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 9 {
			t.Fatalf("skipped events %v, want [1 4 9]", got)
		}
	})
}
