package cdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// A stream stopped by its context and then closed has released its slot
// when Close returns: an operator's `SELECT pg_drop_replication_slot(...)`
// right after a relay stopped, or a standby taking over, finds it free.
// Each round stops the stream while changes flow, where the receive loop
// may end before the context's own clean-up has run.
func TestStream_CloseReturnsWithTheSlotReleased(t *testing.T) {
	dbURL, pool := pgtest.Migrated(t)
	ctx := context.Background()
	cfg := cdc.Config{DatabaseURL: dbURL, Slot: fmt.Sprintf("close_%d", time.Now().UnixNano()), StatusInterval: time.Millisecond}
	for round := range 40 {
		s, err := cdc.Open(ctx, cfg)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		pos := &allConfirmed{}
		out := make(chan cdc.Change, 4)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Receive(rctx, out, pos) }()
		writeDone := make(chan struct{})
		go func() {
			defer close(writeDone)
			for range 20 {
				if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (topic, payload) SELECT 't', '{}' FROM generate_series(1, 20)`); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for n := 0; n < 50+round*7; n++ {
			select {
			case ch := <-out:
				if ch.Kind == cdc.KindCommit {
					pos.lsn.Store(uint64(ch.LSN))
				}
			case err := <-done:
				t.Fatalf("round %d: receive ended: %v", round, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: no change for 10s", round)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: receive: %v", round, err)
		}
		if err := s.Close(ctx, pos); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active`, cfg.Slot); n != 0 {
			t.Fatalf("round %d: the slot is still active after Close returned", round)
		}
		<-writeDone
	}
}
