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

// timedLatency is one event of a steady run: when it was due to be written
// (at a fixed rate; else when its COMMIT returned), its COMMIT-to-consumer
// time, and whether it was written to the alternate database
// (streamVersusEmpty).
type timedLatency struct {
	at      time.Time
	latency time.Duration
	alt     bool
}

// Blocks is the stream's latency in the blocks of one run, split in two:
// the blocks "on" (deleting, or writing to the filled database) and "off".
type Blocks struct {
	Seconds float64 `json:"seconds"` // the measured run: blocks of interleaveBlock
	// The p50 and p99 of the events of the blocks on and off together, and
	// each block's p99, in run order.
	OnP50ms       float64   `json:"p50_ms_on"`
	OnP99ms       float64   `json:"p99_ms_on"`
	OffP50ms      float64   `json:"p50_ms_off"`
	OffP99ms      float64   `json:"p99_ms_off"`
	OnBlockP99ms  []float64 `json:"p99_ms_on_blocks"`
	OffBlockP99ms []float64 `json:"p99_ms_off_blocks"`
	// The blocks off right after a block on, and after one off: what a
	// block on leaves behind (WAL to flush, pages to write, rows to
	// vacuum) lands in the first.
	OffAfterOnP99ms  float64 `json:"p99_ms_off_after_on"`
	OffAfterOffP99ms float64 `json:"p99_ms_off_after_off"`
	// The median of the blocks' p99s on and off: one stall of the machine
	// makes one block's p99, and can make the pooled p99 of the blocks of
	// a kind (their 1 % slowest events are a few hundred), but not the
	// median block's (run 44 at 0 rows, nothing deleted: a block of 284 ms
	// made the pooled p99s 84.4 and 41.6 ms, the medians 39.3 and 37.3).
	OnMedianBlockP99ms  float64 `json:"p99_ms_on_median_block"`
	OffMedianBlockP99ms float64 `json:"p99_ms_off_median_block"`
}

// MedianRatio is the median block's p99 on over off (0 if none off).
func (bl Blocks) MedianRatio() float64 {
	if bl.OffMedianBlockP99ms == 0 {
		return 0
	}
	return bl.OnMedianBlockP99ms / bl.OffMedianBlockP99ms
}

// medianOf returns the median of xs (0 if none), averaging the middle two
// of an even count.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Interleaved is what the interleaved run measured at one size: on, the
// blocks deleting.
type Interleaved struct {
	Blocks
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

// Ratio is the p99 on over the p99 off (0 if none off).
func (bl Blocks) Ratio() float64 {
	if bl.OffP99ms == 0 {
		return 0
	}
	return bl.OnP99ms / bl.OffP99ms
}

// blockOn reports whether block k of an interleaved run is on (deletes,
// or writes to the filled database): on, off, off, on, on, off, off, on...
func blockOn(k int) bool { return (k%2 == 0) == ((k/2)%2 == 0) }

// streamInterleaved runs the interleaved stream for d (whole blocks) with
// a relay that has no retention to do, once its first gap sweep has
// caught up.
func (b *bench) streamInterleaved(ctx context.Context, d time.Duration) (Interleaved, error) {
	blocks := wholeBlocks(d)
	il := Interleaved{Blocks: Blocks{Seconds: (time.Duration(blocks) * interleaveBlock).Seconds()}}
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
	r, err := b.startRelay("--slot", "bench_steady", "--retention", "0")
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
	start, restore := b.measureInBlocks(blocks)
	defer restore()
	done := make(chan deleting, 1)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from, err := b.retentionFrom(ctx, st)
	if err != nil {
		_ = r.stop()
		return il, err
	}
	go func() { done <- deleteInBlocks(dctx, st, il.Compression, blocks, start, from) }()
	res, err := b.steady(ctx, 1000, r, r.pid())
	if err != nil {
		cancel() // else it ends with its last block
	}
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
		if blockOn(k) {
			nOn++
		}
	}
	il.DeletedPerS = float64(del.deleted) / (float64(nOn) * interleaveBlock.Seconds())
	il.split(res.timed, res.measureFrom, blocks, func(k int, _ timedLatency) bool { return blockOn(k) })
	if il.Deleted == 0 {
		fmt.Fprintln(os.Stderr, "growth: the interleaved run deleted nothing (nothing older than its retention): its blocks compare the stream with itself")
	}
	return il, nil
}

// wholeBlocks is how many blocks of interleaveBlock d holds, rounded up to
// a multiple of four, and at least four: on, off, off, on balances only in
// fours.
func wholeBlocks(d time.Duration) int {
	n := int((d + interleaveBlock - 1) / interleaveBlock)
	return max(4, (n+3)/4*4)
}

// retentionFrom is where the interleaved run's deletes begin: where the
// relays' retention runs before it stopped (outbox.retention_progress),
// past the dead rows they left, which a walk from the oldest event would
// read first; from the oldest if none ran.
func (b *bench) retentionFrom(ctx context.Context, st *store.Store) (store.RetentionCursor, error) {
	p, ok, err := st.RetentionProgress(ctx, false)
	if err != nil || !ok {
		return store.RetentionCursor{}, err
	}
	return p.Walked, nil
}

// measureInBlocks makes the next steady run measure blocks of
// interleaveBlock after retention's warm-up, and returns a channel that
// receives the moment its measuring begins, and what puts it all back.
func (b *bench) measureInBlocks(blocks int) (start <-chan time.Time, restore func()) {
	warm := b.warmAtLeast(retentionWarmup)
	steadyFor := b.o.steady
	b.o.steady = time.Duration(blocks) * interleaveBlock
	began := make(chan time.Time, 1)
	b.atMeasure = func() { began <- time.Now() }
	return began, func() {
		b.atMeasure = nil
		b.o.steady = steadyFor
		warm()
	}
}

// deleting is what deleteInBlocks did.
type deleting struct {
	from    time.Time // when the blocks began
	err     error
	deleted int64
	steps   int
	slow    int // steps over interleaveEvery
}

// deleteInBlocks waits for start, then in each block on deletes SENT events
// older than interleaveRetention, from cursor on, interleaveBatch a
// statement every interleaveEvery, with retention's own step, until blocks
// have passed (its last statement may end just after) or ctx ends.
func deleteInBlocks(ctx context.Context, st *store.Store, compress string, blocks int, start <-chan time.Time, cursor store.RetentionCursor) (out deleting) {
	select {
	case out.from = <-start:
	case <-ctx.Done():
		return out
	}
	cutoff := time.Now().Add(-interleaveRetention)
	for k := range blocks {
		end := out.from.Add(time.Duration(k+1) * interleaveBlock)
		if !blockOn(k) {
			select {
			case <-time.After(time.Until(end)):
				continue
			case <-ctx.Done():
				return out
			}
		}
		for next := time.Now(); next.Before(end); next = next.Add(interleaveEvery) {
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
				return out
			}
			s := time.Now()
			_, deleted, to, err := st.RetentionStep(ctx, false, cursor, cutoff, interleaveBatch, compress)
			if err != nil {
				out.err = err
				return out
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
	return out
}

// split sorts the events by the block they were due in (from the start of
// measuring, from: the writer's, by which it chose the database), on or
// off as isOn says, and sets the p50s and p99s; events past the last block
// are left out.
func (bl *Blocks) split(timed []timedLatency, from time.Time, blocks int, isOn func(k int, t timedLatency) bool) {
	type block struct{ on, off []time.Duration }
	byBlock := make([]block, blocks)
	for _, t := range timed {
		k := int(t.at.Sub(from) / interleaveBlock)
		if t.at.Before(from) || k >= blocks {
			continue
		}
		if isOn(k, t) {
			byBlock[k].on = append(byBlock[k].on, t.latency)
		} else {
			byBlock[k].off = append(byBlock[k].off, t.latency)
		}
	}
	var on, off, afterOn, afterOff []time.Duration
	for k, blk := range byBlock {
		if k > 0 && blockOn(k-1) {
			afterOn = append(afterOn, blk.off...)
		} else {
			afterOff = append(afterOff, blk.off...)
		}
	}
	if slices.Sort(afterOn); len(afterOn) > 0 {
		bl.OffAfterOnP99ms = quantileMs(afterOn, 0.99)
	}
	if slices.Sort(afterOff); len(afterOff) > 0 {
		bl.OffAfterOffP99ms = quantileMs(afterOff, 0.99)
	}
	p99 := func(ls []time.Duration, all *[]time.Duration, p99s *[]float64) {
		if len(ls) == 0 {
			return
		}
		slices.Sort(ls)
		*all = append(*all, ls...)
		*p99s = append(*p99s, quantileMs(ls, 0.99))
	}
	for _, blk := range byBlock {
		p99(blk.on, &on, &bl.OnBlockP99ms)
		p99(blk.off, &off, &bl.OffBlockP99ms)
	}
	bl.OnMedianBlockP99ms, bl.OffMedianBlockP99ms = medianOf(bl.OnBlockP99ms), medianOf(bl.OffBlockP99ms)
	slices.Sort(on)
	slices.Sort(off)
	if len(on) > 0 {
		bl.OnP50ms, bl.OnP99ms = quantileMs(on, 0.50), quantileMs(on, 0.99)
	}
	if len(off) > 0 {
		bl.OffP50ms, bl.OffP99ms = quantileMs(off, 0.50), quantileMs(off, 0.99)
	}
}
