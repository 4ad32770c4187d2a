package relay

import (
	"context"
	"sync"
	"time"
)

// window bounds what is in flight (handed to the pipeline, no status row
// yet), in events and bytes, so memory stays flat whatever the transaction
// size: a full window stops the relay reading the slot.
type window struct {
	mu                  sync.Mutex
	cond                *sync.Cond
	events, bytes       int
	maxEvents, maxBytes int
	progress            time.Time // the last release, or when the window last stopped being empty
}

func newWindow(maxEvents, maxBytes int) *window {
	w := &window{maxEvents: maxEvents, maxBytes: maxBytes}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits for room for n events of size bytes, or until ctx ends
// (returning its error). An empty window always has room, so one oversized
// batch cannot deadlock.
func (w *window) acquire(ctx context.Context, n, bytes int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full(n, bytes) {
		defer context.AfterFunc(ctx, func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})()
		for w.full(n, bytes) && ctx.Err() == nil {
			w.cond.Wait()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if w.events == 0 {
		w.progress = time.Now()
	}
	w.events += n
	w.bytes += bytes
	return nil
}

// full reports, with w.mu held, whether n more events of size bytes must wait.
func (w *window) full(n, bytes int) bool {
	return w.events > 0 && (w.events+n > w.maxEvents || w.bytes+bytes > w.maxBytes)
}

func (w *window) release(n, bytes int) {
	w.mu.Lock()
	w.events -= n
	w.bytes -= bytes
	w.progress = time.Now()
	w.mu.Unlock()
	w.cond.Broadcast()
}

// stalled is how long events have been in flight without any of them
// getting its status row: 0 when none is in flight.
func (w *window) stalled() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events == 0 {
		return 0
	}
	return time.Since(w.progress)
}

// used is what is in flight now.
func (w *window) used() (events, bytes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events, w.bytes
}
