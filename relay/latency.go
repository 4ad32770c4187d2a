package relay

import (
	"sync"
	"time"
)

// statusLatency is a moving measure of the status statements' time (the
// stream's insert_outcomes and barrier, the poller's record_outcomes, poll
// mode's direct writes), written by them and read by the retainer: recent
// averages about the last 8 statements, baseline about the last 512, so a
// rise shows in recent long before the baseline follows it.
type statusLatency struct {
	mu               sync.Mutex
	recent, baseline float64 // seconds; 0 until the first statement
}

// Weights of a new statement in the two averages.
const (
	latencyRecentWeight   = 1.0 / 8
	latencyBaselineWeight = 1.0 / 512
)

// observe adds one statement's time; on a nil l it does nothing.
func (l *statusLatency) observe(d time.Duration) {
	if l == nil {
		return
	}
	s := d.Seconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.baseline == 0 {
		l.recent, l.baseline = s, s
		return
	}
	l.recent += latencyRecentWeight * (s - l.recent)
	l.baseline += latencyBaselineWeight * (s - l.baseline)
}

// read returns the recent and the baseline time (zero before any statement).
func (l *statusLatency) read() (recent, baseline time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.recent * float64(time.Second)), time.Duration(l.baseline * float64(time.Second))
}
