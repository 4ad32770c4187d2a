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
const backfillPage = 10000

// slotHooks records a new slot's backfill as started before the slot is
// created and, once it is, starts the backfill from its snapshot; the
// backfill's result comes on *done.
func (r *Relay) slotHooks(ctx context.Context, cfg *cdc.Config, done *<-chan error) {
	cfg.BeforeCreate = func(ctx context.Context) error { return r.store.BackfillStarted(ctx, r.cfg.Slot) }
	cfg.OnCreate = func(_ context.Context, snapshot string) error {
		var err error
		*done, err = r.startBackfill(ctx, snapshot)
		return err
	}
}

// startBackfill imports the new slot's snapshot (before streaming starts,
// as it must) and then, beside the stream, gives every event visible in it
// that has no status row a PENDING row, due now, in pages: these are
// exactly the events committed before the slot's consistent point, which
// its stream will not bring. The poller delivers them. The result comes on
// the channel; the backfill stops when ctx ends. If it does not finish,
// the next session drops the slot and does it again
// (recoverUnfinishedBackfill).
func (r *Relay) startBackfill(ctx context.Context, snapshot string) (<-chan error, error) {
	conn, err := pgx.Connect(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	snap, release, err := store.ImportSnapshot(ctx, conn, snapshot)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		defer release()
		done <- r.backfill(ctx, snap)
	}()
	return done, nil
}

// backfill pages through the events snap sees without a status row.
func (r *Relay) backfill(ctx context.Context, snap *store.Store) error {
	start := time.Now()
	pol := r.cfg.Retry
	var total int64
	var after [16]byte
	for {
		ids, err := snap.UnrelayedPage(ctx, after, backfillPage)
		if err != nil {
			return fmt.Errorf("backfilling events committed before slot %q: %w", r.cfg.Slot, err)
		}
		if len(ids) == 0 {
			break
		}
		n, err := r.store.InsertPending(ctx, ids, pol.MaxAttempts, pol.JSON())
		if err != nil {
			return fmt.Errorf("backfilling events committed before slot %q: %w", r.cfg.Slot, err)
		}
		total += n
		r.metrics.Backfilled.Add(float64(n))
		after = ids[len(ids)-1]
	}
	if err := r.store.BackfillFinished(ctx, r.cfg.Slot, total); err != nil {
		return err
	}
	r.log.Info("backfilled the events committed before the new slot; the poller delivers them",
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
