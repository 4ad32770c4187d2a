package store_test

import (
	"context"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// BenchmarkInsertOutcomes: one status statement for 1,000 SENT events.
// Needs TEST_DATABASE_URL (scripts/test.sh sets it).
func BenchmarkInsertOutcomes(b *testing.B) {
	ctx := context.Background()
	_, pool := pgtest.Migrated(b)
	st := store.New(pool)
	const n = 1000
	rows := &store.Outcomes{}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		rows.Reset()
		for i, id := range pgtest.InsertEvents(b, pool, n) {
			rows.Add(store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, Offset: int64(i), MaxAttempts: 5})
		}
		b.StartTimer()
		if visible, err := st.InsertOutcomes(ctx, rows, []byte(`{}`)); err != nil || visible != n {
			b.Fatalf("wrote %d of %d rows: %v", visible, n, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkInsertOutcomesMixed: the statement for 1,000 events of which
// one is retried (insert_outcomes.sql, which also keeps that failed
// attempt), as the stream writes a batch with any outcome but SENT.
func BenchmarkInsertOutcomesMixed(b *testing.B) {
	ctx := context.Background()
	_, pool := pgtest.Migrated(b)
	st := store.New(pool)
	const n = 1000
	rows := &store.Outcomes{}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		rows.Reset()
		for i, id := range pgtest.InsertEvents(b, pool, n) {
			o := store.Outcome{EventID: id, Status: store.StatusSent, Attempts: 1, Offset: int64(i), MaxAttempts: 5}
			if i == 0 {
				o = store.Outcome{EventID: id, Status: store.StatusPending, Attempts: 1, LastError: "refused", MaxAttempts: 5}
			}
			rows.Add(o)
		}
		b.StartTimer()
		if visible, err := st.InsertOutcomes(ctx, rows, []byte(`{}`)); err != nil || visible != n {
			b.Fatalf("wrote %d of %d rows: %v", visible, n, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
