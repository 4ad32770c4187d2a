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
	//go:embed sql/overview_size.sql
	overviewSizeSQL string
	//go:embed sql/overview_outstanding.sql
	overviewOutstandingSQL string
	//go:embed sql/overview_sample.sql
	overviewSampleSQL string
)

// Count is a number of status rows, counted or estimated.
type Count struct {
	N int64
	// Estimated: from a sample of the table, scaled to its size.
	Estimated bool
	// AtLeast: counted up to a bound the rows passed.
	AtLeast bool
}

// TopicCounts are a table's and topic's status rows by status.
type TopicCounts struct {
	Table, Topic string
	ByStatus     map[string]Count
}

// OverviewCounts are the console overview's counts: bounded, so that they
// cost the same on a million status rows as on a hundred.
type OverviewCounts struct {
	// Rows is how many status rows outbox.deliveries holds, from the
	// statistics.
	Rows int64
	// Totals and Topics: PENDING, PROCESSING and FAILED counted exactly up
	// to the bound per status (beyond it, estimated); SENT and SKIPPED
	// counted exactly while the table is small, else estimated.
	Totals map[string]Count
	Topics []TopicCounts
	// OldestPending is the age of the oldest PENDING event.
	OldestPending time.Duration
	// Bounds are the bounds counted within.
	Bounds OverviewBounds
	// Sampled: the table holds more rows than Bounds.Sample; SENT and
	// SKIPPED are estimated from a sample.
	Sampled bool
}

// OverviewBounds bound OverviewCounts's reads.
type OverviewBounds struct {
	// Outstanding is how many PENDING, PROCESSING and FAILED rows are
	// counted exactly, per status.
	Outstanding int
	// Sample is about how many status rows the estimates read; a table
	// that holds no more is counted whole.
	Sample int
}

// OverviewBoundsDefault keeps each statement of OverviewCounts within tens
// of milliseconds on a million status rows (docs/performance.md).
var OverviewBoundsDefault = OverviewBounds{Outstanding: 10000, Sample: 10000}

// statusOrder is the order the statuses are shown in.
var statusOrder = []string{"PENDING", "PROCESSING", "FAILED", "SENT", "SKIPPED"}

// OverviewCounts counts the status rows by status and by table and topic
// within b (OverviewBoundsDefault for zero fields).
func (s *Store) OverviewCounts(ctx context.Context, b OverviewBounds) (*OverviewCounts, error) {
	if b.Outstanding <= 0 {
		b.Outstanding = OverviewBoundsDefault.Outstanding
	}
	if b.Sample <= 0 {
		b.Sample = OverviewBoundsDefault.Sample
	}
	o := &OverviewCounts{Totals: map[string]Count{}, Bounds: b}
	var age float64
	if err := s.db.QueryRow(ctx, overviewSizeSQL).Scan(&o.Rows, &age); err != nil {
		return nil, fmt.Errorf("reading the size of outbox.deliveries: %w", err)
	}
	o.OldestPending = time.Duration(age * float64(time.Second))
	// The sample: every row while the table is small, else about b.Sample.
	percent, whole := 100.0, o.Rows <= int64(b.Sample)
	if !whole {
		percent = 100 * float64(b.Sample) / float64(o.Rows)
	}
	o.Sampled = !whole
	sampled, err := s.groupCounts(ctx, overviewSampleSQL, pgx.QueryExecModeExec, percent)
	if err != nil {
		return nil, err
	}
	outstanding, err := s.groupCounts(ctx, overviewOutstandingSQL, pgx.QueryExecModeExec, b.Outstanding)
	if err != nil {
		return nil, err
	}
	var inSample int64
	for _, g := range sampled {
		inSample += g.Events
	}
	scale := func(n int64) int64 {
		if whole || inSample == 0 {
			return n
		}
		return int64(float64(n) * float64(o.Rows) / float64(inSample))
	}
	// Outstanding statuses: counted, unless a status passed the bound;
	// then the sample says about how far.
	sums, capped, past := map[string]int64{}, map[string]bool{}, map[string]int64{}
	for _, g := range outstanding {
		sums[g.Status] += g.Events
	}
	for st, n := range sums {
		capped[st] = n >= int64(b.Outstanding)
		o.Totals[st] = Count{N: n, AtLeast: capped[st]}
	}
	topics := map[[2]string]map[string]Count{}
	put := func(g TopicStatus, c Count) {
		k := [2]string{g.Table, g.Topic}
		if topics[k] == nil {
			topics[k] = map[string]Count{}
		}
		topics[k][g.Status] = c
	}
	for _, g := range outstanding {
		put(g, Count{N: g.Events, AtLeast: capped[g.Status]})
	}
	for _, g := range sampled {
		if isOutstanding(g.Status) {
			past[g.Status] += scale(g.Events)
			continue
		}
		put(g, Count{N: scale(g.Events), Estimated: !whole})
		o.Totals[g.Status] = Count{N: o.Totals[g.Status].N + scale(g.Events), Estimated: !whole}
	}
	for st := range capped {
		if capped[st] && past[st] > o.Totals[st].N {
			o.Totals[st] = Count{N: past[st], Estimated: true}
		}
	}
	for k, by := range topics {
		o.Topics = append(o.Topics, TopicCounts{Table: k[0], Topic: k[1], ByStatus: by})
	}
	slices.SortFunc(o.Topics, func(a, b TopicCounts) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Topic, b.Topic))
	})
	return o, nil
}

// Statuses are the delivery states in the order the console shows them.
func Statuses() []string { return slices.Clone(statusOrder) }

func isOutstanding(status string) bool {
	return status == "PENDING" || status == "PROCESSING" || status == "FAILED"
}

// groupCounts reads counts per table, topic and status (sql's four
// columns).
func (s *Store) groupCounts(ctx context.Context, sql string, args ...any) ([]TopicStatus, error) {
	return collect(ctx, s.db, "counting status rows", func(r pgx.CollectableRow) (TopicStatus, error) {
		var g TopicStatus
		var topic *string // NULL: mapped events that could not be mapped
		err := r.Scan(&g.Table, &topic, &g.Status, &g.Events)
		if topic != nil {
			g.Topic = *topic
		}
		return g, err
	}, sql, args...)
}
