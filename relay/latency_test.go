package relay

import (
	"testing"
	"time"
)

// observe adds a group's largest commit-to-ack time d, seen at at, with no
// count of its events (the tests that need none); on a nil s it does nothing.
func (s *streamDelay) observe(at time.Time, d time.Duration) { s.observeGroup(at, d, 0) }

// feed observes d every 100 ms from from to to.
func feed(s *streamDelay, from, to time.Time, d time.Duration) {
	for at := from; !at.After(to); at = at.Add(100 * time.Millisecond) {
		s.observe(at, d)
	}
}

// TestStreamDelay_RisesAboveItsFloorWhenEventsComeLaterAndNotWhenIdle
// follows a stream whose status groups, ten a second, reach Kafka 2 ms after
// their commit: no rise. Then for three seconds one group a second takes 80
// ms, the rest 2 ms (the tail moves, an average would hardly): the rise is
// about 78 ms. Two seconds back at 2 ms and it is gone; six seconds with no
// event at all (an idle stream) reads as no rise whatever the last delay
// was, as do the first seconds of a relay, with no floor yet.
func TestStreamDelay_RisesAboveItsFloorWhenEventsComeLaterAndNotWhenIdle(t *testing.T) {
	var s streamDelay
	t0 := time.Now().Truncate(time.Second)
	feed(&s, t0, t0.Add(5*time.Second), 80*time.Millisecond)
	if rise, _, _ := s.rise(t0.Add(5 * time.Second)); rise != 0 {
		t.Fatalf("5 s into a stream: rise %s, want 0 (no floor yet)", rise)
	}
	feed(&s, t0.Add(5*time.Second+100*time.Millisecond), t0.Add(4*time.Minute), 2*time.Millisecond)
	if rise, _, _ := s.rise(t0.Add(4 * time.Minute)); rise > time.Millisecond {
		t.Fatalf("rise over a steady 2 ms: %s, want about 0", rise)
	}
	at := t0.Add(4 * time.Minute)
	for sec := range 3 {
		for i := 1; i <= 10; i++ {
			d := 2 * time.Millisecond
			if i == 5 {
				d = 80 * time.Millisecond
			}
			at = t0.Add(4*time.Minute + time.Duration(sec)*time.Second + time.Duration(i)*100*time.Millisecond)
			s.observe(at, d)
		}
	}
	rise, recent, floor := s.rise(at)
	if rise < 75*time.Millisecond || floor > 3*time.Millisecond {
		t.Fatalf("one group in ten at 80 ms for 3 s: rise %s (recent %s, floor %s), want about 78 ms above a floor of 2 ms", rise, recent, floor)
	}
	back := at.Add(2100 * time.Millisecond)
	feed(&s, at.Add(100*time.Millisecond), back, 2*time.Millisecond)
	if rise, recent, _ := s.rise(back); rise > time.Millisecond {
		t.Fatalf("2 s back at 2 ms: rise %s (recent %s), want about 0", rise, recent)
	}
	s.observe(back.Add(100*time.Millisecond), 500*time.Millisecond)
	if rise, _, _ := s.rise(back.Add(6 * time.Second)); rise != 0 {
		t.Fatalf("6 s after the last event (a slow one): rise %s, want 0 (idle)", rise)
	}
	var none *streamDelay
	none.observe(time.Now(), time.Second) // poll mode: nothing to follow
}

// TestStreamDelay_WorkNeverRaisesTheFloor: 20 quiet seconds at 2 ms, then
// four minutes at 80 ms while background work runs (retention deleting from
// a relay's start): the floor stays at 2 ms, so the rise shows, where a
// floor of every second would have become 80 ms and shown none. Before 10
// quiet seconds there is no floor, and the usual delay is not known (work
// waits for it) unless the stream is idle.
func TestStreamDelay_WorkNeverRaisesTheFloor(t *testing.T) {
	var s streamDelay
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	feed(&s, t0, t0.Add(3*time.Second), 2*time.Millisecond)
	if s.known(t0.Add(3 * time.Second)) {
		t.Fatal("3 s into a stream: its usual delay is known, want not yet (no floor)")
	}
	if !s.known(t0.Add(9 * time.Second)) {
		t.Fatal("6 s after the stream's last event: not known, want known (idle: nothing to watch)")
	}
	feed(&s, t0.Add(3100*time.Millisecond), t0.Add(20*time.Second), 2*time.Millisecond)
	if !s.known(t0.Add(20 * time.Second)) {
		t.Fatal("after 20 quiet seconds the usual delay is not known")
	}
	done := s.work()
	end := t0.Add(4*time.Minute + 20*time.Second)
	feed(&s, t0.Add(20*time.Second+100*time.Millisecond), end, 80*time.Millisecond)
	done()
	rise, recent, floor := s.rise(end)
	if floor > 3*time.Millisecond || rise < 75*time.Millisecond {
		t.Fatalf("after 4 min at 80 ms while work ran: rise %s (recent %s, floor %s), want the floor still 2 ms", rise, recent, floor)
	}
	if late, _, _ := s.strained(end); !late {
		t.Fatal("not strained at 80 ms against a 2 ms floor")
	}
}

// TestStreamDelay_WarmPastOneAndAHalfItsFloor: a stream whose slowest
// events take 4 ms for minutes is not warm at 5.5 ms, warm at 7 ms and at
// 10 ms, and not strained there (20 ms over its floor is); a floor of
// 0.3 ms is not warm at 2 ms (a scheduler's tick), but is at 3 ms.
func TestStreamDelay_WarmPastOneAndAHalfItsFloor(t *testing.T) {
	cases := []struct {
		floor, recent  time.Duration
		warm, strained bool
	}{
		{4 * time.Millisecond, 4 * time.Millisecond, false, false},
		{4 * time.Millisecond, 5500 * time.Microsecond, false, false},
		{4 * time.Millisecond, 7 * time.Millisecond, true, false},
		{4 * time.Millisecond, 10 * time.Millisecond, true, false},
		{4 * time.Millisecond, 30 * time.Millisecond, true, true},
		{300 * time.Microsecond, 2 * time.Millisecond, false, false},
		{300 * time.Microsecond, 3 * time.Millisecond, true, false},
	}
	for _, c := range cases {
		var s streamDelay
		t0 := time.Now().Truncate(time.Second)
		feed(&s, t0, t0.Add(4*time.Minute), c.floor)
		end := t0.Add(4*time.Minute + 2*time.Second)
		feed(&s, t0.Add(4*time.Minute+100*time.Millisecond), end, c.recent)
		strained, _, _ := s.strained(end)
		if got := s.warm(end); got != c.warm || strained != c.strained {
			t.Errorf("floor %s, recent %s: warm %v strained %v, want %v %v", c.floor, c.recent, got, strained, c.warm, c.strained)
		}
	}
	var none *streamDelay
	if none.warm(time.Now()) {
		t.Error("a nil streamDelay (no stream followed) is warm")
	}
}

// feedEvents observes a group of n events whose slowest took d every 100
// ms from from up to (not including) to.
func feedEvents(s *streamDelay, from, to time.Time, d time.Duration, n int) {
	for at := from; at.Before(to); at = at.Add(100 * time.Millisecond) {
		s.observeGroup(at, d, n)
	}
}

// TestStreamDelay_RateIsTheStreamsEventsASecondOverItsLastTenSeconds
// counts a stream of 10 events every 100 ms (100 a second): 3 s after it
// began, 100 a second (not 30: it counts the seconds it has seen, up to 10);
// after 30 s, 100; then 50 every 100 ms for 5 s, 300 over the last 10 s;
// 0 once it has been idle for 5 s, as for a nil streamDelay (poll mode); and
// 2 s after it starts again, 100, not counting the seconds before it was
// idle.
func TestStreamDelay_RateIsTheStreamsEventsASecondOverItsLastTenSeconds(t *testing.T) {
	var s streamDelay
	t0 := time.Now().Truncate(time.Second)
	at := func(secs float64) time.Time { return t0.Add(time.Duration(secs * float64(time.Second))) }
	feedEvents(&s, t0, at(3), 2*time.Millisecond, 10)
	if got := s.rate(at(3)); got != 100 {
		t.Fatalf("3 s into a stream of 100 a second: rate %v, want 100", got)
	}
	feedEvents(&s, at(3), at(30), 2*time.Millisecond, 10)
	if got := s.rate(at(30)); got != 100 {
		t.Fatalf("after 30 s of 100 a second: rate %v, want 100", got)
	}
	if got := s.rate(at(30.5)); got != 100 {
		t.Fatalf("half a second later: rate %v, want 100 (whole seconds only)", got)
	}
	feedEvents(&s, at(30), at(35), 2*time.Millisecond, 50)
	if got := s.rate(at(35)); got != 300 {
		t.Fatalf("5 s of 100 a second, then 5 of 500: rate %v, want 300", got)
	}
	if got := s.rate(at(41)); got != 0 {
		t.Fatalf("6 s after the last event: rate %v, want 0 (idle)", got)
	}
	feedEvents(&s, at(41), at(43), 2*time.Millisecond, 10)
	if got := s.rate(at(43)); got != 100 {
		t.Fatalf("2 s after the stream started again at 100 a second: rate %v, want 100", got)
	}
	if len(s.arrivals) > delayRateSeconds+1 {
		t.Errorf("%d seconds of arrivals kept, want at most %d", len(s.arrivals), delayRateSeconds+1)
	}
	var none *streamDelay
	none.observeGroup(time.Now(), time.Millisecond, 10)
	if got := none.rate(time.Now()); got != 0 {
		t.Fatalf("no stream followed: rate %v, want 0", got)
	}
}
