package relay

import "testing"

func TestTracker(t *testing.T) {
	t.Parallel()

	t.Run("ConfirmsATransactionOnlyWhenAllItsEventsAreDurable", func(t *testing.T) {
		t.Parallel()
		tr := newTracker(100)
		tr.commit(10, 200) // events 1..10
		if got := tr.Confirmed(); got != 100 {
			t.Fatalf("confirmed %s before anything was durable", got)
		}
		tr.madeDurable(9)
		if got := tr.Confirmed(); got != 100 {
			t.Fatalf("confirmed %s with event 10 not durable", got)
		}
		tr.madeDurable(10)
		if got := tr.Confirmed(); got != 200 {
			t.Fatalf("confirmed %s, want 200", got)
		}
	})

	t.Run("DurableEventsOfAnOpenTransactionConfirmNothing", func(t *testing.T) {
		t.Parallel()
		tr := newTracker(100)
		tr.madeDurable(500) // a huge transaction, still without its commit
		if got := tr.Confirmed(); got != 100 {
			t.Fatalf("confirmed %s before the commit was seen", got)
		}
		tr.commit(600, 900)
		tr.madeDurable(600)
		if got := tr.Confirmed(); got != 900 {
			t.Fatalf("confirmed %s, want 900", got)
		}
	})

	t.Run("TransactionsWithoutEventsFollowTheLastEventBeforeThem", func(t *testing.T) {
		t.Parallel()
		tr := newTracker(100)
		tr.commit(5, 200)
		tr.commit(5, 300) // no events of its own
		tr.commit(5, 400)
		if len(tr.commits) != 1 {
			t.Fatalf("%d pending marks, want the empty transactions coalesced into 1", len(tr.commits))
		}
		tr.madeDurable(5)
		if got := tr.Confirmed(); got != 400 {
			t.Fatalf("confirmed %s, want 400", got)
		}
		tr.commit(5, 500) // everything before it is durable already
		if got := tr.Confirmed(); got != 500 {
			t.Fatalf("confirmed %s, want 500", got)
		}
	})

	t.Run("NeverMovesBackwards", func(t *testing.T) {
		t.Parallel()
		tr := newTracker(1000)
		tr.commit(1, 500) // replayed from before the start position
		tr.madeDurable(1)
		if got := tr.Confirmed(); got != 1000 {
			t.Fatalf("confirmed moved back to %s", got)
		}
	})
}
