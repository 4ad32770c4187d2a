package relay

import (
	"bytes"
	"context"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

// statusCeiling tells which replayed events may have a status row: those
// with an id at or below the greatest id that had one when the session
// started (store.HighestStatusID), and those old enough for the poller's
// gap sweep to give them one at any time. Any id scheme is sound; with the
// default time-ordered ids, recent events newer than the last status row
// skip the look-up.
type statusCeiling struct {
	id    [16]byte
	valid bool // false: no status row at all
	// sweepAge: the gap sweep takes events older than --gap-grace by the
	// database's clock; half of it leaves room for the clocks' difference.
	sweepAge time.Duration
}

func readStatusCeiling(ctx context.Context, st *store.Store, gapGrace time.Duration) (statusCeiling, error) {
	c := statusCeiling{sweepAge: gapGrace / 2}
	var err error
	c.id, c.valid, err = st.HighestStatusID(ctx)
	return c, err
}

// mayHaveRow reads e's age from its message timestamp: created_at, or the
// commit time where the table has no created_at.
func (c statusCeiling) mayHaveRow(e *event, now time.Time) bool {
	return (c.valid && bytes.Compare(e.id[:], c.id[:]) <= 0) || now.Sub(e.Record.Timestamp) >= c.sweepAge
}

// markExisting sets skip on events of b that already have a status row of
// their own source, looking up only those the ceiling allows; ids is
// scratch space. A row of another source has the event's id but is not its
// row (an event of outbox.events can take a mapped event's id): the event
// is published, as the first time it was streamed (its own row is never
// written; the intruder's stands for it).
func (c statusCeiling) markExisting(ctx context.Context, st *store.Store, b *batch, ids [][16]byte) error {
	ids = ids[:0]
	now := time.Now()
	for i := range b.events {
		if c.mayHaveRow(&b.events[i], now) {
			ids = append(ids, b.events[i].id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	found, err := st.Existing(ctx, ids)
	if err != nil || len(found) == 0 {
		return err
	}
	for i := range b.events {
		e := &b.events[i]
		if source, ok := found[e.id]; ok && source == e.source() {
			e.skip = true
		}
	}
	return nil
}
