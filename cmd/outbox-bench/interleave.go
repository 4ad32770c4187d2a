package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

// The interleaved run (--growth-interleaved): one stream at 1,000 events/s
// in which the bench itself deletes old SENT events with retention's own
// step (store.RetentionStep, the relay's statement) in every other block.
// Two 60 s runs of the same stream differ here by up to 2.7 times (run 43),
// so runs with retention and runs without, minutes apart, compare the
// machine's minutes as much as retention. Blocks of 10 s in one run, in the
// order on, off, off, on, on, off... (ABBA: a slow drift of the machine
// falls on both alike), compare events that the same minutes saw.
//
// It deletes at retention's keep-up pace, not at the pace the relay's
// retention chooses: a statement of interleaveBatch every interleaveEvery
// is 1,250 a second, the pace the relay's retention holds to while the
// stream's tail is warm (relay.retentionKeepUp times the stream's 1,000 a
// second, which is what it must delete on average to keep up). The relay
// backs off when the stream's tail grows; this does not, so it is the cost
// of keeping up, undiminished.
const (
	interleaveBlock = 10 * time.Second
	interleaveBatch = 100 // the relay's retention statement (retentionBatch)
	interleaveEvery = 80 * time.Millisecond
	// interleaveRetention: the interleaved run deletes what is older than
	// this, past what the growth phase's three retention runs (6d, 5d,
	// 4d) had to delete, so that its blocks find old events to delete.
	interleaveRetention = growthRetention - growthStreamRuns*24*time.Hour
)

// timedLatency is one event of a steady run: when its COMMIT returned, and
// its COMMIT-to-consumer time.
type timedLatency struct {
	at      time.Time
	latency time.Duration
}

// Interleaved is what the interleaved run measured at one size.
type Interleaved struct {
	Seconds float64 `json:"seconds"` // the measured run: blocks of interleaveBlock
	// The stream's p50 and p99 over the events committed in blocks with
	// deletes (On) and without (Off), and each block's p99, in run order.
	OnP50ms       float64   `json:"stream_p50_ms_deleting"`
	OnP99ms       float64   `json:"stream_p99_ms_deleting"`
	OffP50ms      float64   `json:"stream_p50_ms_not_deleting"`
	OffP99ms      float64   `json:"stream_p99_ms_not_deleting"`
	OnBlockP99ms  []float64 `json:"stream_p99_ms_deleting_blocks"`
	OffBlockP99ms []float64 `json:"stream_p99_ms_not_deleting_blocks"`
	// Deleted: events the blocks with deletes deleted, DeletedPerS over
	// their seconds; Steps the statements, SlowSteps those that took longer
	// than interleaveEvery (the pace then falls behind 1,000 a second).
	Deleted     int64   `json:"deleted"`
	DeletedPerS float64 `json:"deleted_per_s"`
	Steps       int     `json:"steps"`
	SlowSteps   int     `json:"slow_steps"`
	// Compression: the WAL compression of the deletes' transactions
	// (store.RetentionWALCompression, as the relay's retention).
	Compression string `json:"wal_compression,omitempty"`
}

// Ratio is the p99 with deletes over the p99 without (0 if none without).
func (il Interleaved) Ratio() float64 {
	if il.OffP99ms == 0 {
		return 0
	}
	return il.OnP99ms / il.OffP99ms
}

// blockDeletes reports whether block k of the interleaved run deletes: on,
// off, off, on, on, off, off, on...
func blockDeletes(k int) bool { return (k%2 == 0) == ((k/2)%2 == 0) }

// streamInterleaved runs the interleaved stream for d (whole blocks) with
// a relay that has no retention to do, once its first gap sweep has
// caught up.
func (b *bench) streamInterleaved(ctx context.Context, d time.Duration) (Interleaved, error) {
	blocks := max(int(d/interleaveBlock), 2)
	il := Interleaved{Seconds: (time.Duration(blocks) * interleaveBlock).Seconds()}
	st, err := store.Open(b.o.dbURL, 30*time.Second)
	if err != nil {
		return il, err
	}
	defer st.Close()
	if il.Compression, err = store.RetentionWALCompression(ctx, b.pool); err != nil {
		return il, err
	}
	if err := b.freshSlot(ctx, "bench_steady"); err != nil {
		return il, err
	}
	defer b.dropSlot(ctx, "bench_steady")
	if err := b.trimTopic(ctx); err != nil {
		return il, err
	}
	defer b.noteServerWork(ctx, "interleaved run")()
	t0 := time.Now()
	r, err := b.startRelay("--slot", "bench_steady")
	if err != nil {
		return il, err
	}
	if err := b.untilStreaming(ctx, "the relay"); err != nil {
		_ = r.stop()
		return il, err
	}
	if _, err := r.untilSwept(ctx, t0); err != nil {
		_ = r.stop()
		return il, err
	}
	fmt.Fprintf(os.Stderr, "growth: stream at 1000 events/s, %d blocks of %v, deleting in every other at %d a statement every %v\n",
		blocks, interleaveBlock, interleaveBatch, interleaveEvery)
	defer b.warmAtLeast(retentionWarmup)()
	steadyFor := b.o.steady
	b.o.steady = time.Duration(blocks) * interleaveBlock
	defer func() { b.o.steady = steadyFor }()

	start := make(chan time.Time, 1)
	b.atMeasure = func() { start <- time.Now() }
	defer func() { b.atMeasure = nil }()
	type deleting struct {
		from    time.Time
		err     error
		deleted int64
		steps   int
		slow    int
	}
	done := make(chan deleting, 1)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var out deleting
		defer func() { done <- out }()
		select {
		case out.from = <-start:
		case <-dctx.Done():
			return
		}
		cutoff := time.Now().Add(-interleaveRetention)
		var cursor store.RetentionCursor
		for k := range blocks {
			end := out.from.Add(time.Duration(k+1) * interleaveBlock)
			if !blockDeletes(k) {
				select {
				case <-time.After(time.Until(end)):
					continue
				case <-dctx.Done():
					return
				}
			}
			for next := time.Now(); next.Before(end); next = next.Add(interleaveEvery) {
				select {
				case <-time.After(time.Until(next)):
				case <-dctx.Done():
					return
				}
				s := time.Now()
				_, deleted, to, err := st.RetentionStep(dctx, false, cursor, cutoff, interleaveBatch, il.Compression)
				if err != nil {
					out.err = err
					return
				}
				cursor = to
				out.deleted += deleted
				out.steps++
				if took := time.Since(s); took > interleaveEvery {
					out.slow++
					next = time.Now().Add(-interleaveEvery) // no burst to catch up
				}
			}
		}
	}()
	res, err := b.steady(ctx, 1000, r, r.pid())
	cancel()
	del := <-done
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	if err == nil {
		err = del.err
	}
	if err != nil {
		return il, err
	}
	if del.from.IsZero() {
		return il, fmt.Errorf("the interleaved run never began measuring")
	}
	il.Deleted, il.Steps, il.SlowSteps = del.deleted, del.steps, del.slow
	nOn := 0
	for k := range blocks {
		if blockDeletes(k) {
			nOn++
		}
	}
	il.DeletedPerS = float64(del.deleted) / (float64(nOn) * interleaveBlock.Seconds())
	il.split(res.timed, del.from, blocks)
	return il, nil
}

// split sorts the events by the block of their COMMIT (from the start of
// measuring, from) and sets the p50s and p99s; events past the last block
// are left out.
func (il *Interleaved) split(timed []timedLatency, from time.Time, blocks int) {
	byBlock := make([][]time.Duration, blocks)
	for _, t := range timed {
		k := int(t.at.Sub(from) / interleaveBlock)
		if k < 0 || k >= blocks {
			continue
		}
		byBlock[k] = append(byBlock[k], t.latency)
	}
	var on, off []time.Duration
	for k, ls := range byBlock {
		if len(ls) == 0 {
			continue
		}
		slices.Sort(ls)
		if blockDeletes(k) {
			on = append(on, ls...)
			il.OnBlockP99ms = append(il.OnBlockP99ms, quantileMs(ls, 0.99))
		} else {
			off = append(off, ls...)
			il.OffBlockP99ms = append(il.OffBlockP99ms, quantileMs(ls, 0.99))
		}
	}
	slices.Sort(on)
	slices.Sort(off)
	if len(on) > 0 {
		il.OnP50ms, il.OnP99ms = quantileMs(on, 0.50), quantileMs(on, 0.99)
	}
	if len(off) > 0 {
		il.OffP50ms, il.OffP99ms = quantileMs(off, 0.50), quantileMs(off, 0.99)
	}
}
