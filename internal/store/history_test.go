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
	all := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE topic <> '(all)'`)
	if rows != minutes*len(topics) || all != rows {
		t.Fatalf("%d of %d rows have %d delivered and %d failed, want all %d", rows, all, wantDelivered, wantFailed, minutes*len(topics))
	}
	totals := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE topic = '(all)' AND delivered = $1 AND failed = $2`,
		len(topics)*wantDelivered, len(topics)*wantFailed)
	hours := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_hours WHERE hour = $1 AND delivered = $2 AND failed = $3`,
		start, minutes*wantDelivered, minutes*wantFailed)
	if totals != minutes || hours != len(topics) || pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_hours`) != hours {
		t.Fatalf("%d minutes' totals (want %d) and %d hours' rows (want %d, one a topic) add up", totals, minutes, hours, len(topics))
	}

	st := store.New(pool)
	total, err := st.DeliveryMinutes(ctx, start, store.AllTopics)
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
	byHour, err := st.DeliveryTopicsByHour(ctx, start)
	if err != nil || fmt.Sprint(byHour) != fmt.Sprint(byTopic) {
		t.Fatalf("per topic, from the hours: %v (%v); from the minutes: %v", byHour, err, byTopic)
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
// of them, and the hours that ended before it, and no other.
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
	// Minutes: 8:00 and 9:59 (two topics and their total each); hours: 8:00
	// (two topics); 9:00 ends at the cutoff, 10:00 after.
	if err != nil || n != 6+2 {
		t.Fatalf("deleted %d rows (%v), want the 6 of the two minutes before the cutoff and the 2 of the hour before", n, err)
	}
	left := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes WHERE minute >= $1`, cutoff)
	hours := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_hours`)
	if all := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.delivery_minutes`); left != 6 || all != left || hours != 4 {
		t.Fatalf("%d rows of %d from the cutoff on are left, want 6 of 6, and %d hours' rows, want 4", left, all, hours)
	}
}
