package relay

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

const replayGrace = 5 * time.Minute

// replayBundle is ten events, ids in ascending order, and a store.
type replayBundle struct {
	pool *pgxpool.Pool
	st   *store.Store
	ids  [][16]byte
}

func setupReplay(t *testing.T) *replayBundle {
	t.Helper()
	_, pool := pgtest.Migrated(t)
	ids := pgtest.InsertEvents(t, pool, 10)
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return &replayBundle{pool: pool, st: store.New(pool), ids: ids}
}

// rows gives the events at these indexes a status row.
func (r *replayBundle) rows(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if _, err := r.pool.Exec(context.Background(), `INSERT INTO outbox.deliveries (event_id, status)
			VALUES ($1, 'SENT')`, r.ids[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *replayBundle) ceiling(t *testing.T) statusCeiling {
	t.Helper()
	c, err := readStatusCeiling(context.Background(), r.st, replayGrace)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// batchOf is a batch of the events, created at the given time, in id order.
func (r *replayBundle) batchOf(created time.Time) *batch {
	b := &batch{}
	for _, id := range r.ids {
		e := event{id: id}
		e.Record.Timestamp = created
		b.events = append(b.events, e)
	}
	return b
}

// skippedAfterLookup runs the replay look-up on a fresh batch and returns
// the indexes of the events it marked as having a row.
func (r *replayBundle) skippedAfterLookup(t *testing.T, c statusCeiling) (out []int) {
	t.Helper()
	b := r.batchOf(time.Now())
	if err := c.markExisting(context.Background(), r.st, b, nil); err != nil {
		t.Fatal(err)
	}
	for i, e := range b.events {
		if e.skip {
			out = append(out, i)
		}
	}
	return out
}

func TestReplayLookup_WithNoStatusRowsNothingMayHaveOne(t *testing.T) {
	t.Parallel()
	r := setupReplay(t)
	c := r.ceiling(t)
	b := r.batchOf(time.Now())
	for i := range b.events {
		if c.mayHaveRow(&b.events[i], time.Now()) {
			t.Errorf("event %d may have a row, but the table is empty", i)
		}
	}
}

func TestReplayLookup_SkipsExactlyTheEventsWithARowAndLooksUpOnlyUpToTheCeiling(t *testing.T) {
	t.Parallel()
	r := setupReplay(t)
	r.rows(t, 1, 4) // the ceiling is event 4
	c := r.ceiling(t)
	b := r.batchOf(time.Now())
	for i := range b.events {
		if got, want := c.mayHaveRow(&b.events[i], time.Now()), i <= 4; got != want {
			t.Errorf("event %d: mayHaveRow = %v, want %v", i, got, want)
		}
	}
	if got := r.skippedAfterLookup(t, c); !slices.Equal(got, []int{1, 4}) {
		t.Fatalf("skipped events %v, want [1 4]", got)
	}
}

func TestReplayLookup_AnyIdSchemeIsSound(t *testing.T) {
	t.Parallel()
	r := setupReplay(t)
	r.rows(t, 1, 4, 9)
	// A row for an id greater than every event's (an application's own
	// random id, say): every event is then looked up.
	if _, err := r.pool.Exec(context.Background(), `INSERT INTO outbox.deliveries (event_id, status)
		VALUES ('ffffffff-ffff-4fff-bfff-ffffffffffff', 'SENT')`); err != nil {
		t.Fatal(err)
	}
	if got := r.skippedAfterLookup(t, r.ceiling(t)); !slices.Equal(got, []int{1, 4, 9}) {
		t.Fatalf("skipped events %v, want [1 4 9]", got)
	}
}

func TestReplayLookup_EventsOldEnoughForTheGapSweepAreLookedUpWhateverTheirId(t *testing.T) {
	t.Parallel()
	r := setupReplay(t)
	// The poller may give such an event a row at any time, after the
	// session read its ceiling.
	c := statusCeiling{sweepAge: replayGrace / 2}
	now := time.Now()
	b := r.batchOf(now.Add(-replayGrace / 2))
	for i := range b.events {
		if !c.mayHaveRow(&b.events[i], now) {
			t.Errorf("event %d, created %s ago, is not looked up", i, replayGrace/2)
		}
	}
	b = r.batchOf(now.Add(-replayGrace/2 + time.Second))
	if c.mayHaveRow(&b.events[0], now) {
		t.Errorf("an event younger than half the gap grace, with no row anywhere, is looked up")
	}
}
