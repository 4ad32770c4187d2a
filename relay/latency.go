package relay

import (
	"slices"
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

// streamDelay follows how late streamed events reach Kafka, by their tail:
// each second's slowest commit-to-ack (of the status groups seen in it),
// against a floor, the lower quartile of those maxima over the last
// delayFloorSeconds quiet seconds: seconds in which no background work
// (retention's deletes, the stream's gap sweep) ran or had just ended, so
// that what the work does never becomes the measure it is held to.
// Written by the stream, read (and told of work) by the retainer and the
// poller. Compared by difference, not ratio: the relay's and the server's
// clocks may differ by a constant, which both carry. A moving average of
// the groups' maxima missed what retention does (run 8 of the growth phase:
// p99 30 ms against 6 ms while it deleted, and no back-off), and a floor
// that counted the seconds retention was deleting in (run 9) was raised by
// it from the relay's start.
type streamDelay struct {
	mu        sync.Mutex
	last      time.Time       // the latest observation
	second    time.Time       // the second being filled
	slowest   time.Duration   // its slowest so far
	disturbed bool            // work ran in it
	prev      time.Duration   // the slowest of the second before, if it was the one just before
	maxima    []time.Duration // of quiet seconds, oldest first, at most delayFloorSeconds
	working   int             // background work running now
	settled   time.Time       // the end of the latest work, plus delaySettle
	arrivals  []arrival       // events streamed a second, the last delayRateSeconds
}

// arrival is how many streamed events reached Kafka in one second.
type arrival struct {
	second time.Time
	events int
}

const (
	delayFloorSeconds = 300
	// delayFloorMin: fewer quiet seconds than this and there is no floor
	// to compare with yet.
	delayFloorMin = 10
	// delayIdle: with no streamed event for this long, the stream is idle
	// and shows no strain, whatever its last delay was.
	delayIdle = 5 * time.Second
	// delaySettle: what work did shows on the stream for this long after
	// it ends (the walsender decodes its WAL first).
	delaySettle = time.Second
)

// work marks background work running from now until the returned function
// is called; on a nil s it does nothing.
func (s *streamDelay) work() (done func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.working++
	s.disturbed = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.working--
		s.settled = time.Now().Add(delaySettle)
	}
}

// observeGroup adds a status group of n events with an outcome from Kafka,
// the largest commit-to-ack time among them d, seen at at; on a nil s it
// does nothing.
func (s *streamDelay) observeGroup(at time.Time, d time.Duration, n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(at, n)
	sec := at.Truncate(time.Second)
	busy := s.working > 0 || at.Before(s.settled)
	switch {
	case s.second.IsZero():
	case sec.After(s.second):
		if !s.disturbed {
			s.maxima = append(s.maxima, s.slowest)
			if n := len(s.maxima) - delayFloorSeconds; n > 0 {
				s.maxima = s.maxima[n:]
			}
		}
		s.prev = 0
		if sec.Sub(s.second) == time.Second {
			s.prev = s.slowest
		}
	default:
		s.slowest = max(s.slowest, d)
		s.disturbed = s.disturbed || busy
		s.last = at
		return
	}
	s.second, s.slowest, s.disturbed, s.last = sec, d, busy, at
}

// delayRateSeconds: the stream's rate (rate) is its events over at most
// this many whole seconds.
const delayRateSeconds = 10

// count adds n events streamed at at, with s.mu held.
func (s *streamDelay) count(at time.Time, n int) {
	if n <= 0 {
		return
	}
	sec := at.Truncate(time.Second)
	if last := len(s.arrivals) - 1; last >= 0 && s.arrivals[last].second.Equal(sec) {
		s.arrivals[last].events += n
		return
	}
	s.arrivals = append(s.arrivals, arrival{second: sec, events: n})
	old := 0 // seconds too old to count, or more than are counted (a clock set back)
	for old < len(s.arrivals) && (s.arrivals[old].second.Before(sec.Add(-delayRateSeconds*time.Second)) || len(s.arrivals)-old > delayRateSeconds+1) {
		old++
	}
	s.arrivals = s.arrivals[old:]
}

// rate returns the streamed events a second over the whole seconds before
// now's, the last delayRateSeconds of them or fewer since the stream began
// or was last idle; 0 on a nil s, while the stream is idle, or with no whole
// second yet.
func (s *streamDelay) rate(now time.Time) float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle(now) {
		return 0
	}
	end := now.Truncate(time.Second)
	from := end.Add(-delayRateSeconds * time.Second)
	n, first := 0, end
	for i, a := range s.arrivals {
		if i > 0 && a.second.Sub(s.arrivals[i-1].second) > delayIdle {
			n, first = 0, end // an idle gap: count from after it
		}
		if !a.second.Before(from) && a.second.Before(end) {
			n += a.events
			if a.second.Before(first) {
				first = a.second
			}
		}
	}
	if secs := end.Sub(first) / time.Second; secs > 0 {
		return float64(n) / float64(secs)
	}
	return 0
}

// delayRise: the tail's rise over its floor that is strain, beyond the
// floor itself.
const delayRise = 20 * time.Millisecond

// strained reports whether the tail is later than its floor by more than
// the floor and delayRise at now (false on a nil s), with both.
func (s *streamDelay) strained(now time.Time) (bool, time.Duration, time.Duration) {
	if s == nil {
		return false, 0, 0
	}
	rise, recent, floor := s.rise(now)
	return rise > max(delayRise, floor), recent, floor
}

// delayWarmMin: a rise under this is no sign whatever the floor (a floor
// of a fraction of a millisecond doubles with a scheduler's tick).
const delayWarmMin = 2 * time.Millisecond

// warm reports whether the tail is later than one and a half times its
// floor (and by more than delayWarmMin) at now, false on a nil s: short of
// strain, but the stream's p99 moves with it, so background work should go
// no faster. The floor is of each second's slowest event, above the
// stream's p99 (growth bench run 13: a floor of 4.5 ms, a p99 of 3.5 ms
// over the same quiet runs): one and a half times the floor is about twice
// the p99.
func (s *streamDelay) warm(now time.Time) bool {
	if s == nil {
		return false
	}
	rise, _, floor := s.rise(now)
	return rise > max(delayWarmMin, floor/2)
}

// Why background work waits for the stream (hold).
const (
	delayUnknown = "the stream's usual delay is not known yet"
	delayLate    = "streamed events reach Kafka later"
)

// hold says why background work (retention, the gap sweep) should wait at
// now, "" when it need not: delayUnknown while the stream has no floor
// yet (known), delayLate while it is strained; with the recent tail and
// the floor.
func (s *streamDelay) hold(now time.Time) (why string, recent, floor time.Duration) {
	if !s.known(now) {
		return delayUnknown, 0, 0
	}
	if late, recent, floor := s.strained(now); late {
		return delayLate, recent, floor
	}
	return "", 0, 0
}

// known reports whether work may start now as far as the stream's delay
// can tell: the stream is idle (or not followed: nil), or it has a floor.
// Without one, work would run unwatched, and its own seconds never make one.
func (s *streamDelay) known(now time.Time) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle(now) || len(s.maxima) >= delayFloorMin
}

// idle reports, with s.mu held, whether no streamed event was seen for
// delayIdle (or ever).
func (s *streamDelay) idle(now time.Time) bool {
	return s.last.IsZero() || now.Sub(s.last) > delayIdle
}

// rise returns how far the tail of the last second or two is above its
// floor at now (0 while the stream is idle or there is no floor yet).
func (s *streamDelay) rise(now time.Time) (rise, recent, floor time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle(now) || len(s.maxima) < delayFloorMin {
		return 0, 0, 0
	}
	sorted := slices.Clone(s.maxima)
	slices.Sort(sorted)
	floor = sorted[len(sorted)/4]
	recent = max(s.slowest, s.prev)
	return max(recent-floor, 0), recent, floor
}
