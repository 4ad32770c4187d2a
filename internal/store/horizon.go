package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Horizon finds how far the gap sweep may walk: grace ago, and never past
// the start of the oldest transaction open in the database, since
// created_at defaults to now(), the transaction's start, so an open
// transaction (even one that has not written yet) may still commit events
// older than anything swept so far.
//
// It needs no privilege. Where the relay's role may read a transaction's
// start (its own sessions; with superuser or pg_read_all_stats, every
// session) it takes it. Where it may not, it takes the time of the last
// look before it first saw the transaction open: the transaction started
// after that. A transaction already open at the first look holds the
// horizon where it is until it ends. So what pg_read_all_stats buys is a
// horizon that does not wait for transactions that were open before the
// relay started, and one look's interval (--poll-interval) more precision.
type Horizon struct {
	last  time.Time            // the server's time at the previous look; zero before the first
	since map[string]time.Time // open transactions not seen started, by virtual id: when they were first seen
}

// horizonMargin covers the gap between a transaction taking its start time
// and taking its virtual id's lock, and between those and a look.
const horizonMargin = 10 * time.Millisecond

// Look reads the open transactions through s and returns the horizons: grace
// ago, and recheck ago (the recheck pass), each bounded by the oldest open
// transaction's start. Call it before every sweep, in its own statement.
func (h *Horizon) Look(ctx context.Context, s *Store, grace, recheck time.Duration) (upper, recheckUpper time.Time, err error) {
	var now, server time.Time
	var prepared pgtype.Timestamptz // NULL: none
	var vxids []string
	var starts []pgtype.Timestamptz
	if err := s.db.QueryRow(ctx, sweepHorizonSQL, s.now()).Scan(&now, &server, &prepared, &vxids, &starts); err != nil {
		return upper, recheckUpper, fmt.Errorf("gap sweep horizon: %w", err)
	}
	oldest := now
	if prepared.Valid {
		oldest = prepared.Time
	}
	since := make(map[string]time.Time, len(vxids))
	for i, v := range vxids {
		start, seen := h.since[v]
		switch {
		case starts[i].Valid:
			start = starts[i].Time
		case !seen && h.last.IsZero():
			start = time.Time{} // open before the first look: its start is unknown
		case !seen:
			start = h.last
		}
		if !starts[i].Valid {
			since[v] = start
		}
		if start.Before(oldest) {
			oldest = start
		}
	}
	h.since, h.last = since, server
	bound := func(d time.Duration) time.Time {
		t := now.Add(-d)
		if oldest.Before(t) {
			t = oldest
		}
		return t.Add(-horizonMargin)
	}
	return bound(grace), bound(recheck), nil
}
