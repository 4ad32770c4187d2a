package relay

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// backfillPage is how many events one backfill statement takes.
const backfillPage = 10000

// slotBackfill is the backfill of the slot a session creates, if it does:
// it runs beside the session and ends with it.
type slotBackfill struct {
	stop func()
	done <-chan error // nil until a backfill starts, and once its result is taken
	// keys are the keys of the events the backfill will find, read from
	// the slot's snapshot before streaming starts: the stream queues their
	// events until it is done. More than maxQueuedKeys: it queues every
	// event with a key.
	keys []store.QueuedKey
	// every: the backfill will find rows of a mapped table, whose keys
	// are not known without mapping every row: every event with a key
	// queues.
	every bool
}

// hookBackfill has cdc record the backfill as started before it creates
// the slot and, once it has, start the backfill from the slot's snapshot.
func (r *Relay) hookBackfill(ctx context.Context, cfg *cdc.Config, pub *kafka.Publisher) *slotBackfill {
	ctx, stop := context.WithCancel(ctx)
	b := &slotBackfill{stop: stop}
	cfg.BeforeCreate = func(ctx context.Context) error { return r.store.BackfillStarted(ctx, r.cfg.Slot) }
	cfg.OnCreate = func(_ context.Context, snapshot string) error {
		var err error
		b.done, b.keys, b.every, err = r.startBackfill(ctx, snapshot, pub)
		return err
	}
	return b
}

// watch is a session stage when a backfill runs: a backfill that fails
// ends the session (the next one starts over); a stop leaves it for the
// next start. finished is called once the backfill has written its last
// page.
func (b *slotBackfill) watch(ctx, hard context.Context, finished func()) func() error {
	return func() error {
		select {
		case err := <-b.done:
			b.done = nil
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				finished()
			}
			return err
		case <-hard.Done():
			return nil
		}
	}
}

// end stops the backfill and waits for it, unless watch took its result.
// Call it after the session's stages have returned.
func (b *slotBackfill) end() {
	b.stop()
	if b.done != nil {
		<-b.done
	}
}

// startBackfill imports the new slot's snapshot (before streaming starts,
// as it must) and then, beside the stream, delivers every event visible in
// it that has no status row, in pages: these are exactly the events
// committed before the slot's consistent point, which its stream will not
// bring (backfill). The result comes on the channel; the backfill stops
// when ctx ends. If it does not finish, the next session drops the slot and
// does it again (recoverUnfinishedBackfill).
func (r *Relay) startBackfill(ctx context.Context, snapshot string, pub *kafka.Publisher) (_ <-chan error, _ []store.QueuedKey, every bool, err error) {
	conn, err := pgdial.Connect(ctx, r.cfg.DatabaseURL, r.cfg.ReplicationTimeout)
	if err != nil {
		return nil, nil, false, err
	}
	snap, release, err := store.ImportSnapshot(ctx, conn, snapshot)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, false, err
	}
	snap = snap.WithStatementTimeout(r.cfg.StatementTimeout)
	keys, err := snap.UnrelayedKeys(ctx, maxQueuedKeys+1)
	var waiting []store.QueuedKey
	if err == nil {
		waiting, err = snap.QueuedKeys(ctx, r.hold(), maxQueuedKeys+1)
	}
	if err == nil && len(keys) <= maxQueuedKeys {
		every, err = r.mappedBackfillFinds(ctx, snap)
	}
	if err != nil {
		release()
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, false, fmt.Errorf("backfilling events committed before slot %q: %w", r.cfg.Slot, err)
	}
	var d *direct
	if len(waiting) <= maxQueuedKeys { // else every event gets a PENDING row
		d = r.newDirect(pub, waiting)
	}
	done := make(chan error, 1)
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		defer release()
		done <- r.backfill(ctx, snap, d)
	}()
	return done, keys, every, nil
}

// backfill pages through the events snap sees without a status row and
// delivers them with d, or, when d is nil, gives them PENDING rows, due
// now, for the poller. The next page is read while one is written; with d,
// a page holds at most a quarter of --max-in-flight-bytes of event values.
func (r *Relay) backfill(ctx context.Context, snap *store.Store, d *direct) error {
	start := time.Now()
	pol := r.cfg.Retry
	g, gctx := errgroup.WithContext(ctx)
	steps := make(chan backfillStep, 1)
	g.Go(func() error {
		defer close(steps)
		var after store.BackfillCursor
		budget, perEvent := r.cfg.MaxInFlightBytes/4, 0
		for {
			ids, next, err := snap.UnrelayedPage(gctx, after, backfillPage)
			if err != nil || len(ids) == 0 {
				return err
			}
			after = next
			for len(ids) > 0 {
				step := backfillStep{ids: ids}
				if d != nil {
					// Ask for about as many events as the budget holds (by
					// the size of the events read so far, and an eighth
					// more): the statement reads every id it is given, and
					// the rows past the budget were read for nothing.
					want := ids
					if perEvent > 0 {
						want = ids[:min(len(ids), budget/perEvent+budget/perEvent/8+1)]
					}
					if step.page, err = r.store.ReadBackfillEvents(gctx, want, budget); err != nil {
						return err
					}
					ids = ids[step.page.Read:]
					if n := len(step.page.Values); n > 0 {
						perEvent = max(step.page.Bytes/n, 1)
					}
				} else {
					ids = nil
				}
				select {
				case steps <- step:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
	})
	var total int64
	g.Go(func() error {
		for step := range steps {
			var n int64
			var err error
			if step.page != nil {
				n, err = d.deliver(gctx, r.store, step.page)
			} else {
				n, err = r.store.InsertPending(gctx, step.ids, pol.MaxAttempts, pol.JSON())
			}
			if err != nil {
				return err
			}
			total += n
			r.metrics.Backfilled.Add(float64(n))
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("backfilling events committed before slot %q: %w", r.cfg.Slot, err)
	}
	n, err := r.backfillMapped(ctx, snap)
	total += n
	if err != nil {
		return err
	}
	if err := r.store.BackfillFinished(ctx, r.cfg.Slot, total); err != nil {
		return err
	}
	r.log.Info("backfilled the events committed before the new slot",
		zap.String("slot", r.cfg.Slot), zap.Int64("events", total), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
	return nil
}

// backfillMapped gives PENDING rows, with their records kept, to the rows
// snap sees without a status row in the mapped tables that have order
// columns (mapped_walk.go), and returns how many it wrote.
func (r *Relay) backfillMapped(ctx context.Context, snap *store.Store) (int64, error) {
	pender := newMappedPender(r.settle, r.metrics, r.cfg.Retry.JSON(), r.ce)
	floor := r.cfg.mappedFloor(time.Now())
	var total int64
	for _, t := range r.cfg.mapped() {
		if !t.Ordered() {
			continue
		}
		from := store.BackfillCursor{CreatedAt: floor, Seq: -1}
		n, _, _, err := pender.walkMapped(ctx, snap, r.store, t, from, time.Time{}, backfillPage,
			r.cfg.MaxInFlightBytes/4, false)
		total += int64(n)
		r.metrics.Backfilled.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("backfilling rows of %s committed before slot %q: %w", t.QualifiedName(), r.cfg.Slot, err)
		}
	}
	return total, nil
}

// backfillStep is what the backfill's reader hands its writer: a page of
// events read for direct delivery, or (page nil) ids for PENDING rows.
type backfillStep struct {
	ids  [][16]byte
	page *store.EventPage
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
	dropped, err := cdc.DropSlot(ctx, r.cfg.DatabaseURL, r.cfg.Slot, r.cfg.ReplicationTimeout)
	if err != nil {
		return err
	}
	if dropped {
		r.log.Warn("the backfill of the replication slot did not finish (the relay stopped during it): "+
			"dropped the slot to create it again and backfill", zap.String("slot", r.cfg.Slot))
	} else {
		r.log.Info("the replication slot was not created yet (an earlier attempt failed or stopped): creating it and backfilling",
			zap.String("slot", r.cfg.Slot))
	}
	return nil
}

// mappedBackfillFinds reports whether the backfill will find rows of a
// mapped table (with order columns), looking no further back than it will
// (Config.mappedFloor). Their keys are not known without mapping every
// row, so every event with a key then queues until the backfill is done.
func (r *Relay) mappedBackfillFinds(ctx context.Context, snap *store.Store) (bool, error) {
	floor := r.cfg.mappedFloor(time.Now())
	for _, t := range r.cfg.mapped() {
		if !t.Ordered() {
			continue
		}
		if found, err := snap.MappedUnrelayedExists(ctx, t, floor); err != nil || found {
			return found, err
		}
	}
	return false, nil
}
