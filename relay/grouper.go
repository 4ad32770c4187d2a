package relay

import (
	"context"
	"time"
)

// grouper gathers finished batches, in order, into groups of one status
// statement each: as many as fit in max events and finish within linger of
// the first. Lingering costs no latency (the events are on Kafka already)
// and saves statements when events come one transaction at a time.
type grouper struct {
	in     <-chan *batch
	hard   context.Context
	max    int
	linger time.Duration

	timer *time.Timer
	held  *batch // taken from in, not finished within the linger: next group's first
	group []*batch
}

// next returns the next group (valid until the next call), nil once in is
// closed and drained, or hard's error.
func (g *grouper) next() ([]*batch, error) {
	b := g.held
	g.held = nil
	if b == nil {
		var ok bool
		if b, ok = <-g.in; !ok {
			return nil, nil
		}
	}
	select {
	case <-b.done:
	case <-g.hard.Done():
		return nil, g.hard.Err()
	}
	g.group = append(g.group[:0], b)
	n := len(b.events)
	if g.timer == nil {
		g.timer = time.NewTimer(g.linger)
	} else {
		g.timer.Reset(g.linger)
	}
	defer g.timer.Stop()
	for n < g.max {
		select {
		case nb, ok := <-g.in:
			if !ok {
				return g.group, nil // stopping: write what is here now
			}
			select {
			case <-nb.done:
				g.group = append(g.group, nb)
				n += len(nb.events)
			case <-g.timer.C:
				g.held = nb
				return g.group, nil
			case <-g.hard.Done():
				return nil, g.hard.Err()
			}
		case <-g.timer.C:
			return g.group, nil
		case <-g.hard.Done():
			return nil, g.hard.Err()
		}
	}
	return g.group, nil
}
