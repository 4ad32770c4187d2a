package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// Several relays adding the counts of the same minutes and topics at once
// (each its own pool, its rows in its own order) add up, with no lost
// update and no deadlock.
func TestHistory_SeveralWritersAddUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, pool := pgtest.Migrated(t)
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	const writers, flushes, minutes = 4, 25, 3
	topics := []string{"orders", "payments", "(other)"}
	var wg sync.WaitGroup
	errs := make(chan error, writers*flushes)
	for w := range writers {
		st, err := store.Open(pgtest.RelayURL(dbURL), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		wg.Go(func() {
			for f := range flushes {
				var counts []store.MinuteCount
				for i := range minutes * len(topics) {
					j := (i + w + f) % (minutes * len(topics)) // each writer in another order
					counts = append(counts, store.MinuteCount{Minute: start.Add(time.Duration(j/len(topics)) * time.Minute),
						Topic: topics[j%len(topics)], Delivered: int64(w + 1), Failed: 1})
				}
				if err := st.AddDeliveryMinutes(ctx, counts); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a writer failed: %v", err)
	}
	// Per row: each writer w added w+1 delivered and 1 failed, flushes times.
	wantDelivered, wantFailed := flushes*(1+2+3+4), flushes*writers
	rows := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE delivered = $1 AND failed = $2`,
		wantDelivered, wantFailed)
	if all := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes`); rows != minutes*len(topics) || all != rows {
		t.Fatalf("%d of %d rows have %d delivered and %d failed, want all %d", rows, all, wantDelivered, wantFailed, minutes*len(topics))
	}

	st := store.New(pool)
	total, err := st.DeliveryMinutes(ctx, start, "")
	if err != nil {
		t.Fatal(err)
	}
	one, err := st.DeliveryMinutes(ctx, start.Add(time.Minute), "payments")
	if err != nil {
		t.Fatal(err)
	}
	byTopic, err := st.DeliveryTopics(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(len(total), total[0].Delivered, total[0].Failed, len(one), one[0].Minute.Equal(start.Add(time.Minute)), one[0].Delivered,
		len(byTopic), byTopic[0].Delivered)
	want := fmt.Sprint(minutes, 3*wantDelivered, 3*wantFailed, minutes-1, true, wantDelivered, len(topics), minutes*wantDelivered)
	if got != want {
		t.Errorf("read back (minutes, first minute's delivered and failed, payments' minutes from the second, its first minute, "+
			"its delivered, topics, a topic's delivered): %s, want %s", got, want)
	}
}

// DeleteDeliveryMinutes deletes the minutes before its cutoff, every topic
// of them, and no other.
func TestHistory_DeletingKeepsTheMinutesFromTheCutoffOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	st := store.New(pool)
	cutoff := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var counts []store.MinuteCount
	for _, m := range []time.Duration{-2 * time.Hour, -time.Minute, 0, time.Minute} {
		for _, topic := range []string{"a", "b"} {
			counts = append(counts, store.MinuteCount{Minute: cutoff.Add(m), Topic: topic, Delivered: 1})
		}
	}
	if err := st.AddDeliveryMinutes(ctx, counts); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteDeliveryMinutes(ctx, cutoff)
	if err != nil || n != 4 {
		t.Fatalf("deleted %d rows (%v), want the 4 of the two minutes before the cutoff", n, err)
	}
	if left := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE minute >= $1`, cutoff); left != 4 {
		t.Fatalf("%d rows from the cutoff on are left, want 4", left)
	}
}
