package relay

import (
	"sync"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
)

// tracker computes the position the slot may be confirmed to: the end LSN of
// the last transaction all of whose events have a durable status row, with
// every earlier transaction's events durable too.
type tracker struct {
	mu      sync.Mutex
	durable uint64    // every event with seq <= durable has a status row
	commits []txnMark // committed, not yet confirmable; seq ascending
	pos     atomic.Uint64
}

// txnMark is a committed transaction: its last event and its end LSN.
type txnMark struct {
	lastSeq uint64
	end     pglogrepl.LSN
}

func newTracker(start pglogrepl.LSN) *tracker {
	t := &tracker{}
	t.pos.Store(uint64(start))
	return t
}

// Confirmed implements cdc.Positioner.
func (t *tracker) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(t.pos.Load()) }

// commit records that the transaction ending at end has lastSeq as its last
// event (or, when it had none, the last event before it).
func (t *tracker) commit(lastSeq uint64, end pglogrepl.LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.commits); n > 0 && t.commits[n-1].lastSeq == lastSeq {
		t.commits[n-1].end = end // a transaction without events: coalesce
	} else {
		t.commits = append(t.commits, txnMark{lastSeq: lastSeq, end: end})
	}
	t.advance()
}

// madeDurable records that every event up to seq has a status row.
func (t *tracker) madeDurable(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.durable = max(t.durable, seq)
	t.advance()
}

func (t *tracker) advance() {
	i := 0
	for i < len(t.commits) && t.commits[i].lastSeq <= t.durable {
		i++
	}
	if i == 0 {
		return
	}
	if end := uint64(t.commits[i-1].end); end > t.pos.Load() {
		t.pos.Store(end)
	}
	t.commits = append(t.commits[:0], t.commits[i:]...)
}
