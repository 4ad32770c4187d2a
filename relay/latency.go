package relay

import (
	"math"
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

// streamDelay follows how late streamed events reach Kafka: each status
// group's largest commit-to-ack time, as a moving average over about
// delayRecentTau, against the lowest that average has been over the last
// delayFloorSpan (its floor). Written by the stream, read by the retainer.
// A difference, not a ratio: the relay's and the server's clocks may
// differ by a constant, which both carry.
type streamDelay struct {
	mu     sync.Mutex
	recent float64   // seconds
	last   time.Time // of the latest observation
	// floors[i] is the lowest recent in the i-th delayBucket of time
	// (a ring of delayFloorSpan/delayBucket), and at its start.
	floors []delayFloor
}

type delayFloor struct {
	start time.Time
	min   float64
}

const (
	delayRecentTau = time.Second
	delayBucket    = 10 * time.Second
	delayFloorSpan = 5 * time.Minute
	// delayIdle: with no streamed event for this long, the stream is idle
	// and shows no strain, whatever its last delay was.
	delayIdle = 5 * time.Second
)

// observe adds a group's largest commit-to-ack time d, seen at at; on a nil
// s it does nothing.
func (s *streamDelay) observe(at time.Time, d time.Duration) {
	if s == nil {
		return
	}
	v := d.Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.IsZero() || at.Sub(s.last) > delayIdle {
		s.recent = v
	} else if dt := at.Sub(s.last); dt > 0 {
		s.recent += (1 - math.Exp(-dt.Seconds()/delayRecentTau.Seconds())) * (v - s.recent)
	}
	s.last = at
	bucket := at.Truncate(delayBucket)
	if n := len(s.floors); n > 0 && s.floors[n-1].start.Equal(bucket) {
		s.floors[n-1].min = min(s.floors[n-1].min, s.recent)
	} else {
		s.floors = append(s.floors, delayFloor{start: bucket, min: s.recent})
	}
	for len(s.floors) > 0 && at.Sub(s.floors[0].start) > delayFloorSpan {
		s.floors = s.floors[1:]
	}
}

// rise returns how far the recent delay is above its floor at now (0 while
// the stream is idle or before any event).
func (s *streamDelay) rise(now time.Time) (rise, recent, floor time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.IsZero() || now.Sub(s.last) > delayIdle {
		return 0, 0, 0
	}
	low := s.recent
	for _, f := range s.floors {
		low = min(low, f.min)
	}
	sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	return sec(s.recent - low), sec(s.recent), sec(low)
}
