package store

import (
	"cmp"
	"context"
	_ "embed" // the statements
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/history_add.sql
	historyAddSQL string
	//go:embed sql/history_delete.sql
	historyDeleteSQL string
	//go:embed sql/history_minutes.sql
	historyMinutesSQL string
	//go:embed sql/history_topics.sql
	historyTopicsSQL string
	//go:embed sql/history_topics_hours.sql
	historyTopicsHoursSQL string
)

// AllTopics is the topic of outbox.delivery_minutes' rows that hold a
// minute's total over every topic. No topic has this name (Kafka allows no
// parentheses in one).
const AllTopics = "(all)"

// MinuteCount is how many events of a topic were recorded SENT (Delivered)
// and FAILED in a minute (outbox.delivery_minutes) or an hour; Minute is
// zero for a sum over minutes.
type MinuteCount struct {
	Minute    time.Time
	Topic     string
	Delivered int64
	Failed    int64
}

// AddDeliveryMinutes adds counts, per minute and topic, to
// outbox.delivery_minutes, with each minute's total (AllTopics), and to
// outbox.delivery_hours per hour and topic, in one statement: each relay's
// counts add to the others'.
func (s *Store) AddDeliveryMinutes(ctx context.Context, counts []MinuteCount) error {
	if len(counts) == 0 {
		return nil
	}
	type key struct {
		at    time.Time
		topic string
	}
	minutes, hours := map[key]MinuteCount{}, map[key]MinuteCount{}
	add := func(to map[key]MinuteCount, at time.Time, topic string, c MinuteCount) {
		x := to[key{at, topic}]
		to[key{at, topic}] = MinuteCount{Minute: at, Topic: topic, Delivered: x.Delivered + c.Delivered, Failed: x.Failed + c.Failed}
	}
	for _, c := range counts {
		at := c.Minute.UTC().Truncate(time.Minute)
		add(minutes, at, c.Topic, c)
		add(minutes, at, AllTopics, c)
		add(hours, at.Truncate(time.Hour), c.Topic, c)
	}
	args := append(columns(minutes), columns(hours)...)
	if _, err := s.db.Exec(ctx, historyAddSQL, args...); err != nil {
		return fmt.Errorf("adding %d per-minute counts to outbox.delivery_minutes: %w", len(counts), err)
	}
	return nil
}

// columns returns counts as the arrays of history_add.sql, sorted by time
// and topic: two relays lock shared rows in one order, so neither waits
// for the other in a deadlock.
func columns[K comparable](counts map[K]MinuteCount) []any {
	sorted := slices.SortedFunc(maps.Values(counts), func(a, b MinuteCount) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Topic, b.Topic))
	})
	at := make([]time.Time, len(sorted))
	topics := make([]string, len(sorted))
	delivered := make([]int64, len(sorted))
	failed := make([]int64, len(sorted))
	for i, c := range sorted {
		at[i], topics[i], delivered[i], failed[i] = c.Minute, c.Topic, c.Delivered, c.Failed
	}
	return []any{at, topics, delivered, failed}
}

// DeleteDeliveryMinutes deletes the per-minute counts of minutes before
// before and the per-hour counts of hours ended before it, and returns how
// many rows it deleted.
func (s *Store) DeleteDeliveryMinutes(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, historyDeleteSQL, before).Scan(&n); err != nil {
		return 0, fmt.Errorf("deleting per-minute counts before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// DeliveryMinutes reads events of topic (AllTopics: every topic)
// delivered and failed per minute from minute since on, oldest first.
// Minutes without a row are left out.
func (s *Store) DeliveryMinutes(ctx context.Context, since time.Time, topic string) ([]MinuteCount, error) {
	return collect(ctx, s.db, "reading outbox.delivery_minutes", func(r pgx.CollectableRow) (MinuteCount, error) {
		x := MinuteCount{Topic: topic}
		return x, r.Scan(&x.Minute, &x.Delivered, &x.Failed)
	}, historyMinutesSQL, since, topic)
}

// DeliveryTopics sums events delivered and failed per topic from minute
// since on, the busiest topic first: a row a topic and minute read, for
// the last hour or so.
func (s *Store) DeliveryTopics(ctx context.Context, since time.Time) ([]MinuteCount, error) {
	return collect(ctx, s.db, "reading outbox.delivery_minutes by topic", scanTopicCount, historyTopicsSQL, since)
}

// DeliveryTopicsByHour sums events delivered and failed per topic from the
// hour since on (outbox.delivery_hours), the busiest topic first: a row a
// topic and hour read, for a day.
func (s *Store) DeliveryTopicsByHour(ctx context.Context, since time.Time) ([]MinuteCount, error) {
	return collect(ctx, s.db, "reading outbox.delivery_hours by topic", scanTopicCount, historyTopicsHoursSQL, since)
}

func scanTopicCount(r pgx.CollectableRow) (MinuteCount, error) {
	var x MinuteCount
	return x, r.Scan(&x.Topic, &x.Delivered, &x.Failed)
}
