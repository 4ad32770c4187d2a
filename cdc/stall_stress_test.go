package cdc_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

type allConfirmed struct{ lsn atomic.Uint64 }

func (a *allConfirmed) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(a.lsn.Load()) }

// TestStream_StallStress drains many short backlogs through a stream whose
// status deadlines fall often, with a consumer that stops now and then, and
// fails when the stream stops bringing changes while the server has more.
// It never showed the drain stall of issue 20, whose cause was TCP on
// loopback (see pgdial.MaxSegment); `outbox-bench --stall-drains` did.
func TestStream_StallStress(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("OUTBOX_STALL_ROUNDS"))
	if rounds == 0 {
		t.Skip("set OUTBOX_STALL_ROUNDS")
	}
	dbURL, pool := pgtest.Migrated(t)
	ctx := context.Background()
	first, err := cdc.Open(ctx, cdc.Config{DatabaseURL: dbURL}) // creates the slot
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx, &allConfirmed{}); err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		const txs, perTx = 20, 500
		for range txs {
			if _, err := pool.Exec(ctx, `INSERT INTO outbox.events (topic, payload)
				SELECT 't', jsonb_build_object('n', n, 'pad', repeat('x', 1000 + (n % 7) * 900)) FROM generate_series(1, $1) AS n`, perTx); err != nil {
				t.Fatal(err)
			}
		}
		s, err := cdc.Open(ctx, cdc.Config{DatabaseURL: dbURL, StatusInterval: 3 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		pos := &allConfirmed{}
		out := make(chan cdc.Change, 16)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Receive(rctx, out, pos) }()
		inserts := 0
		last := time.Now()
		for inserts < txs*perTx {
			select {
			case ch := <-out:
				last = time.Now()
				if ch.Kind == cdc.KindInsert {
					inserts++
				}
				if ch.Kind == cdc.KindCommit {
					pos.lsn.Store(uint64(ch.LSN))
				}
				if rand.IntN(500) == 0 {
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				}
			case err := <-done:
				t.Fatalf("round %d: receive ended after %d inserts: %v", round, inserts, err)
			case <-time.After(100 * time.Millisecond):
				if time.Since(last) > 10*time.Second {
					t.Fatalf("round %d: stalled after %d of %d inserts", round, inserts, txs*perTx)
				}
			}
		}
		cancel()
		<-done
		if err := s.Close(ctx, pos); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d inserts", round, inserts)
	}
}
