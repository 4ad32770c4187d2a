package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// backfillPage is how many events one backfill statement takes.
const backfillPage = 5000

// slotHooks records a new slot's backfill as started before the slot is
// created, and backfills from its snapshot once it is.
func (r *Relay) slotHooks(cfg *cdc.Config) {
	cfg.BeforeCreate = func(ctx context.Context) error { return r.store.BackfillStarted(ctx, r.cfg.Slot) }
	cfg.OnCreate = r.backfill
}

// backfill gives every event visible in the new slot's snapshot that has no
// status row a PENDING row, due now, in pages: these are exactly the events
// committed before the slot's consistent point, which its stream will not
// bring. The poller delivers them. Streaming starts once it is done; if the
// relay stops before, the next start drops the slot and does it again
// (recoverUnfinishedBackfill).
func (r *Relay) backfill(ctx context.Context, snapshot string) error {
	start := time.Now()
	conn, err := pgx.Connect(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pol := r.cfg.Retry
	var total int64
	err = store.InSnapshot(ctx, conn, snapshot, func(snap *store.Store) error {
		var after [16]byte
		for {
			ids, err := snap.UnrelayedPage(ctx, after, backfillPage)
			if err != nil || len(ids) == 0 {
				return err
			}
			n, err := r.store.InsertPending(ctx, ids, pol.MaxAttempts, pol.JSON())
			if err != nil {
				return err
			}
			total += n
			r.metrics.Backfilled.Add(float64(n))
			after = ids[len(ids)-1]
		}
	})
	if err != nil {
		return fmt.Errorf("backfilling events committed before slot %q: %w", r.cfg.Slot, err)
	}
	if err := r.store.BackfillFinished(ctx, r.cfg.Slot, total); err != nil {
		return err
	}
	r.log.Info("created replication slot; backfilled the events committed before it, which the poller delivers",
		zap.String("slot", r.cfg.Slot), zap.Int64("events", total), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	return nil
}

// recoverUnfinishedBackfill drops the slot if its backfill started and never
// finished (the relay stopped during it), so that the session creates it
// again and backfills from a new snapshot. A slot in use by another relay is
// left to it (*cdc.SlotInUseError).
func (r *Relay) recoverUnfinishedBackfill(ctx context.Context) error {
	unfinished, err := r.store.BackfillUnfinished(ctx, r.cfg.Slot)
	if err != nil || !unfinished {
		return err
	}
	if err := cdc.DropSlot(ctx, r.cfg.DatabaseURL, r.cfg.Slot); err != nil {
		return err
	}
	r.log.Warn("the backfill of the replication slot did not finish (the relay stopped during it): "+
		"dropped the slot to create it again and backfill", zap.String("slot", r.cfg.Slot))
	return nil
}
