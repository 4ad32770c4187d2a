package store_test

import (
	"context"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

func TestAttempts_AreKeptOnlyForRowsTheStatementWritesAndOnlyTheLast10(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	st := store.New(pool)
	ids := pgtest.InsertEvents(t, pool, 3)
	attempts := func(id [16]byte) int {
		return pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_attempts WHERE event_id = $1`, id)
	}

	t.Run("TheStreamKeepsAFailedAttemptOnceAndNoSentOne", func(t *testing.T) {
		o := &store.Outcomes{}
		o.Add(store.Outcome{EventID: ids[0], Status: store.StatusPending, Attempts: 1, LastError: "refused", Delay: 1, MaxAttempts: 5})
		o.Add(store.Outcome{EventID: ids[1], Status: store.StatusSent, Attempts: 1, MaxAttempts: 5})
		for range 2 { // written again: its rows exist, and are left alone
			if _, err := st.InsertOutcomes(ctx, o, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		if a, s := attempts(ids[0]), attempts(ids[1]); a != 1 || s != 0 {
			t.Errorf("kept %d attempts of the retried event (want 1) and %d of the SENT one (want 0)", a, s)
		}
	})

	t.Run("ThePollerKeepsOnlyTheLast10OfRowsItStillHolds", func(t *testing.T) {
		for i := range store.AttemptsKept + 3 {
			if _, err := pool.Exec(ctx, `UPDATE outbox.deliveries SET status = 'PROCESSING', locked_by = 'me' WHERE event_id = $1`, ids[0]); err != nil {
				t.Fatal(err)
			}
			o := &store.Outcomes{}
			o.Add(store.Outcome{EventID: ids[0], Status: store.StatusPending, Attempts: int32(i + 2), LastError: "refused", MaxAttempts: 50})
			if err := st.RecordOutcomes(ctx, "me", o); err != nil {
				t.Fatal(err)
			}
		}
		if n := attempts(ids[0]); n != store.AttemptsKept {
			t.Errorf("kept %d attempts, want the last %d", n, store.AttemptsKept)
		}
		if n := pgtest.Count(t, pool, `SELECT min(attempt) FROM outbox.delivery_attempts WHERE event_id = $1`, ids[0]); n != 5 {
			t.Errorf("the oldest attempt kept is %d, want 5 (of 1..14)", n)
		}
		// A row another instance holds now is not this one's to record.
		if _, err := pool.Exec(ctx, `INSERT INTO outbox.deliveries (event_id, status, locked_by) VALUES ($1, 'PROCESSING', 'other')`, ids[2]); err != nil {
			t.Fatal(err)
		}
		o := &store.Outcomes{}
		o.Add(store.Outcome{EventID: ids[2], Status: store.StatusPending, Attempts: 1, LastError: "refused", MaxAttempts: 5})
		if err := st.RecordOutcomes(ctx, "me", o); err != nil {
			t.Fatal(err)
		}
		if n := attempts(ids[2]); n != 0 {
			t.Errorf("kept %d attempts of a row another instance holds, want 0", n)
		}
	})
}
