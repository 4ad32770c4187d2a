package relay

import (
	"testing"
	"time"
)

// feed observes d every 100 ms from from to to.
func feed(s *streamDelay, from, to time.Time, d time.Duration) {
	for at := from; !at.After(to); at = at.Add(100 * time.Millisecond) {
		s.observe(at, d)
	}
}

// TestStreamDelay_RisesAboveItsFloorWhenEventsComeLaterAndNotWhenIdle
// follows a stream whose groups reach Kafka 2 ms after their commit for
// four minutes, then 80 ms for three seconds: the recent delay rises about
// 78 ms above the floor. Back at 2 ms for five seconds, the rise is gone;
// six seconds with no event at all (an idle stream) reads as no rise,
// whatever the last delay was.
func TestStreamDelay_RisesAboveItsFloorWhenEventsComeLaterAndNotWhenIdle(t *testing.T) {
	var s streamDelay
	t0 := time.Now()
	feed(&s, t0, t0.Add(4*time.Minute), 2*time.Millisecond)
	if rise, _, _ := s.rise(t0.Add(4 * time.Minute)); rise > time.Millisecond {
		t.Fatalf("rise over a steady 2 ms: %s, want about 0", rise)
	}
	slow := t0.Add(4*time.Minute + 3*time.Second)
	feed(&s, t0.Add(4*time.Minute+100*time.Millisecond), slow, 80*time.Millisecond)
	rise, recent, floor := s.rise(slow)
	if rise < 70*time.Millisecond || floor > 3*time.Millisecond {
		t.Fatalf("after 3 s at 80 ms: rise %s (recent %s, floor %s), want over 70 ms above a floor of about 2 ms", rise, recent, floor)
	}
	back := slow.Add(5 * time.Second)
	feed(&s, slow.Add(100*time.Millisecond), back, 2*time.Millisecond)
	if rise, recent, _ := s.rise(back); rise > 5*time.Millisecond {
		t.Fatalf("5 s back at 2 ms: rise %s (recent %s), want under 5 ms", rise, recent)
	}
	s.observe(back.Add(100*time.Millisecond), 500*time.Millisecond)
	if rise, _, _ := s.rise(back.Add(6 * time.Second)); rise != 0 {
		t.Fatalf("6 s after the last event (a slow one): rise %s, want 0 (idle)", rise)
	}
	var none *streamDelay
	none.observe(time.Now(), time.Second) // poll mode: nothing to follow
}
