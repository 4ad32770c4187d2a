package relay

import "sync"

// window bounds what is in flight (handed to the pipeline, no status row
// yet), in events and bytes, so memory stays flat whatever the transaction
// size: a full window stops the relay reading the slot.
type window struct {
	mu                  sync.Mutex
	cond                *sync.Cond
	events, bytes       int
	maxEvents, maxBytes int
}

func newWindow(maxEvents, maxBytes int) *window {
	w := &window{maxEvents: maxEvents, maxBytes: maxBytes}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits for room for n events of size bytes. An empty window always
// has room, so one oversized batch cannot deadlock.
func (w *window) acquire(n, bytes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.events > 0 && (w.events+n > w.maxEvents || w.bytes+bytes > w.maxBytes) {
		w.cond.Wait()
	}
	w.events += n
	w.bytes += bytes
}

func (w *window) release(n, bytes int) {
	w.mu.Lock()
	w.events -= n
	w.bytes -= bytes
	w.mu.Unlock()
	w.cond.Broadcast()
}
