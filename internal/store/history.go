package store

import (
	"cmp"
	"context"
	_ "embed" // the statements
	"fmt"
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
	//go:embed sql/history_minutes_topic.sql
	historyMinutesTopicSQL string
	//go:embed sql/history_topics.sql
	historyTopicsSQL string
)

// MinuteCount is how many events of a topic were recorded SENT (Delivered)
// and FAILED in a minute (outbox.delivery_minutes). Topic is "" for every
// topic summed; Minute is zero for a sum over minutes.
type MinuteCount struct {
	Minute    time.Time
	Topic     string
	Delivered int64
	Failed    int64
}

// AddDeliveryMinutes adds counts to outbox.delivery_minutes, in one
// statement: each relay's counts add to the others'. counts is sorted
// (minute, then topic) on the way.
func (s *Store) AddDeliveryMinutes(ctx context.Context, counts []MinuteCount) error {
	if len(counts) == 0 {
		return nil
	}
	slices.SortFunc(counts, func(a, b MinuteCount) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Topic, b.Topic))
	})
	minutes := make([]time.Time, len(counts))
	topics := make([]string, len(counts))
	delivered := make([]int64, len(counts))
	failed := make([]int64, len(counts))
	for i, c := range counts {
		minutes[i], topics[i], delivered[i], failed[i] = c.Minute, c.Topic, c.Delivered, c.Failed
	}
	if _, err := s.db.Exec(ctx, historyAddSQL, minutes, topics, delivered, failed); err != nil {
		return fmt.Errorf("adding %d per-minute counts to outbox.delivery_minutes: %w", len(counts), err)
	}
	return nil
}

// DeleteDeliveryMinutes deletes the per-minute counts of minutes before
// before, and returns how many rows it deleted.
func (s *Store) DeleteDeliveryMinutes(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, historyDeleteSQL, before)
	if err != nil {
		return 0, fmt.Errorf("deleting per-minute counts before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}

// DeliveryMinutes reads events delivered and failed per minute from minute
// since on, oldest first: of topic, or of every topic summed when topic is
// "". Minutes without a row are left out.
func (s *Store) DeliveryMinutes(ctx context.Context, since time.Time, topic string) ([]MinuteCount, error) {
	sql, args := historyMinutesSQL, []any{since}
	if topic != "" {
		sql, args = historyMinutesTopicSQL, append(args, topic)
	}
	return collect(ctx, s.db, "reading outbox.delivery_minutes", func(r pgx.CollectableRow) (MinuteCount, error) {
		x := MinuteCount{Topic: topic}
		return x, r.Scan(&x.Minute, &x.Delivered, &x.Failed)
	}, sql, args...)
}

// DeliveryTopics sums events delivered and failed per topic from minute
// since on, the busiest topic first.
func (s *Store) DeliveryTopics(ctx context.Context, since time.Time) ([]MinuteCount, error) {
	return collect(ctx, s.db, "reading outbox.delivery_minutes by topic", func(r pgx.CollectableRow) (MinuteCount, error) {
		var x MinuteCount
		return x, r.Scan(&x.Topic, &x.Delivered, &x.Failed)
	}, historyTopicsSQL, since)
}
