package cdc

import (
	"context"
	"testing"
	"time"
)

func TestReceiveDeadline_OneContextServesEveryReceiveUntilItsDeadline(t *testing.T) {
	var w receiveDeadline
	defer w.stop()
	parent := context.Background()
	at := time.Now().Add(time.Hour)

	first := w.until(parent, at)
	if got, _ := first.Deadline(); !got.Equal(at) {
		t.Fatalf("deadline %v, want %v", got, at)
	}
	if w.until(parent, at) != first {
		t.Fatal("the same deadline made a new context")
	}
	if w.until(parent, at.Add(time.Minute)) != first {
		t.Fatal("a later deadline made a new context: ending early only costs a turn")
	}

	earlier := w.until(parent, at.Add(-time.Minute))
	if earlier == first {
		t.Fatal("an earlier deadline kept a context that ends too late")
	}
	if first.Err() == nil {
		t.Fatal("the replaced context was not cancelled")
	}

	expired := w.until(parent, time.Now().Add(-time.Second))
	if expired.Err() == nil {
		t.Fatal("a past deadline gave a live context")
	}
	if next := w.until(parent, at); next == expired || next.Err() != nil {
		t.Fatal("an ended context was handed out again")
	}
}
