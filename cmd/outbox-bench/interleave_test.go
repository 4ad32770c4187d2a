package main

import (
	"testing"
	"time"
)

func TestInterleaved_ARunIsWholeFoursOfBlocks(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 4, 10 * time.Second: 4, 40 * time.Second: 4, 41 * time.Second: 8, 4 * time.Minute: 24, 5 * time.Minute: 32} {
		if got := wholeBlocks(d); got != want {
			t.Errorf("wholeBlocks(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestInterleaved_BlocksDeleteOnOffOffOnSoThatADriftFallsOnBoth(t *testing.T) {
	var got []bool
	for k := range 8 {
		got = append(got, blockOn(k))
	}
	want := []bool{true, false, false, true, true, false, false, true}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("blocks deleting: got %v, want %v", got, want)
		}
	}
}

func TestInterleaved_SplitCountsAnEventInTheBlockOfItsCommit(t *testing.T) {
	from := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var timed []timedLatency
	// 4 blocks of 100 events: the blocks deleting (0 and 3) take 9 ms
	// each, the others 1 ms; two slow events in block 1 (a p99 of 100 is
	// the 99th), one event before
	// the first block and one after the last, both left out.
	for k := range 4 {
		for i := range 100 {
			l := time.Millisecond
			if blockOn(k) {
				l = 9 * time.Millisecond
			}
			if k == 1 && (i == 50 || i == 51) {
				l = time.Second
			}
			timed = append(timed, timedLatency{at: from.Add(time.Duration(k)*interleaveBlock + time.Duration(i)*interleaveBlock/100), latency: l})
		}
	}
	timed = append(timed, timedLatency{at: from.Add(-time.Millisecond), latency: time.Hour},
		timedLatency{at: from.Add(4 * interleaveBlock), latency: time.Hour})
	var il Blocks
	il.split(timed, from, 4, func(k int, _ timedLatency) bool { return blockOn(k) })
	if il.OnP50ms != 9 || il.OnP99ms != 9 || il.OffP50ms != 1 {
		t.Errorf("p50/p99 deleting %v/%v, p50 not %v; want 9/9, 1", il.OnP50ms, il.OnP99ms, il.OffP50ms)
	}
	if len(il.OnBlockP99ms) != 2 || len(il.OffBlockP99ms) != 2 {
		t.Fatalf("blocks: deleting %v, not %v; want two each", il.OnBlockP99ms, il.OffBlockP99ms)
	}
	if il.OffBlockP99ms[0] != 1000 || il.OffBlockP99ms[1] != 1 {
		t.Errorf("p99s of the blocks not deleting: %v, want [1000 1] (the slow events in block 1)", il.OffBlockP99ms)
	}
	if il.OnMedianBlockP99ms != 9 || il.OffMedianBlockP99ms != 500.5 || il.MedianRatio() != 9/500.5 {
		t.Errorf("median block p99 on %v, off %v; want 9 and 500.5 (of 1000 and 1)", il.OnMedianBlockP99ms, il.OffMedianBlockP99ms)
	}
	if il.OffAfterOnP99ms != 1000 || il.OffAfterOffP99ms != 1 {
		t.Errorf("p99 of the blocks off after on %v, after off %v; want 1000 (block 1) and 1 (block 2)", il.OffAfterOnP99ms, il.OffAfterOffP99ms)
	}
	if r := il.Ratio(); r <= 0 {
		t.Errorf("ratio %v", r)
	}
}

func TestInterleaved_AnEventCountsInTheBlockItWasDueIn(t *testing.T) {
	from := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var timed []timedLatency
	for k := range 4 {
		for i := range 100 {
			timed = append(timed, timedLatency{at: from.Add(time.Duration(k)*interleaveBlock + time.Duration(i)*interleaveBlock/100),
				latency: time.Millisecond, alt: !blockOn(k)})
		}
	}
	// Two due at the end of block 0 (on: written to the filled database),
	// 2 s late to Kafka: they count in block 0, not in block 1.
	for range 2 {
		timed = append(timed, timedLatency{at: from.Add(interleaveBlock - time.Millisecond), latency: 2 * time.Second})
	}
	var vs Blocks
	vs.split(timed, from, 4, func(_ int, t timedLatency) bool { return !t.alt })
	if len(vs.OnBlockP99ms) != 2 || len(vs.OffBlockP99ms) != 2 {
		t.Fatalf("blocks on %v, off %v; want two each", vs.OnBlockP99ms, vs.OffBlockP99ms)
	}
	if vs.OnBlockP99ms[0] != 2000 || vs.OffP99ms != 1 {
		t.Errorf("block 0's p99 %v ms, the blocks off %v ms; want 2000 and 1", vs.OnBlockP99ms[0], vs.OffP99ms)
	}
}
