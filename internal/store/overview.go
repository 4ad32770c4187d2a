package store

import (
	"cmp"
	"context"
	_ "embed" // the statements
	"fmt"
	"math"
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
	//go:embed sql/topic_details.sql
	topicDetailsSQL string
)

// TopicDetail is what the console's topics page shows of a topic besides
// its counts.
type TopicDetail struct {
	Topic string
	// LastReason, LastError and LastFailed are its newest FAILED event's
	// (LastFailed nil: none is FAILED).
	LastReason, LastError string
	LastFailed            *time.Time
	// OldestPending is the oldest created_at among PendingRead of its
	// PENDING rows (nil: none); when PendingRead reached the bound, older
	// ones may be unread.
	OldestPending *time.Time
	PendingRead   int64
}

// TopicDetails reads each topic's newest failure and oldest PENDING
// event, reading at most pendingBound PENDING rows a topic.
func (s *Store) TopicDetails(ctx context.Context, topics []string, pendingBound int) ([]TopicDetail, error) {
	return collect(ctx, s.db, "reading the topics", func(r pgx.CollectableRow) (TopicDetail, error) {
		var x TopicDetail
		err := r.Scan(&x.Topic, &x.LastReason, &x.LastError, &x.LastFailed, &x.OldestPending, &x.PendingRead)
		return x, err
	}, topicDetailsSQL, pgx.QueryExecModeExec, topics, pendingBound)
}

// Count is a number of status rows, counted or estimated.
type Count struct {
	N int64
	// Estimated: N is from a sample of the table, scaled to its size, give
	// or take Err (two standard errors).
	Estimated bool
	Err       int64
	// AtLeast: N rows were counted, up to a bound the rows reached: there
	// are N or more. Approx, when not 0, is an estimate of how many (give
	// or take Err).
	AtLeast bool
	Approx  int64
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
	// Totals and Topics: PENDING, PROCESSING, FAILED and SKIPPED counted
	// exactly up to Bounds.Outstanding per status and topic (past it: a
	// lower bound, with an estimate); SENT counted exactly while the table
	// is small, else estimated from a sample.
	Totals map[string]Count
	Topics []TopicCounts
	// OldestPending is the age of the oldest PENDING event.
	OldestPending time.Duration
	// Bounds are the bounds counted within.
	Bounds OverviewBounds
	// Sampled: the table holds more rows than Bounds.Sample; SENT is
	// estimated from a sample.
	Sampled bool
}

// OverviewBounds bound OverviewCounts's reads.
type OverviewBounds struct {
	// Outstanding is how many rows of each status but SENT are counted
	// exactly, per topic.
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
	sampled, outstanding, err := s.overviewGroups(ctx, percent, b.Outstanding)
	if err != nil {
		return nil, err
	}
	topics := topicTally{}
	o.countOutstanding(topics, outstanding)
	o.estimateSampled(topics, sampled, sampleEstimate(o.Rows, sampled, whole))
	o.Topics = topics.sorted()
	return o, nil
}

// overviewGroups reads the counts per table, topic and status of a sample
// of percent of the status rows, and the exact counts of the statuses
// counted (up to bound a status and topic). It reads the sample and the
// counts at once (on two of the pool's connections; one after the other in
// a transaction).
func (s *Store) overviewGroups(ctx context.Context, percent float64, bound int) (sampled, outstanding []TopicStatus, err error) {
	var sampleErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sampled, sampleErr = s.groupCounts(ctx, overviewSampleSQL, pgx.QueryExecModeExec, percent)
	}()
	if s.inTx {
		<-done
	}
	outstanding, err = s.groupCounts(ctx, overviewOutstandingSQL, pgx.QueryExecModeExec, bound)
	<-done
	if err = cmp.Or(sampleErr, err); err != nil {
		return nil, nil, err
	}
	return sampled, outstanding, nil
}

// sampleEstimate returns what scales a count of the sample to the table's
// rows, with two standard errors of a proportion of the sample's rows. A
// sample of the whole table (whole), or an empty one, is counted as is.
func sampleEstimate(rows int64, sampled []TopicStatus, whole bool) func(k int64) (n, e int64) {
	var inSample int64
	for _, g := range sampled {
		inSample += g.Events
	}
	return func(k int64) (n, e int64) {
		if whole || inSample == 0 {
			return k, 0
		}
		p := float64(k) / float64(inSample)
		return int64(p * float64(rows)), int64(math.Ceil(2 * float64(rows) * math.Sqrt(p*(1-p)/float64(inSample))))
	}
}

// topicTally holds the counts per table and topic (its key) and status.
type topicTally map[[2]string]map[string]Count

// put sets g's table, topic and status's count.
func (t topicTally) put(g TopicStatus, c Count) {
	k := [2]string{g.Table, g.Topic}
	if t[k] == nil {
		t[k] = map[string]Count{}
	}
	t[k][g.Status] = c
}

// sorted lists the tally by table, then topic.
func (t topicTally) sorted() []TopicCounts {
	var out []TopicCounts
	for k, by := range t {
		out = append(out, TopicCounts{Table: k[0], Topic: k[1], ByStatus: by})
	}
	slices.SortFunc(out, func(a, b TopicCounts) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Topic, b.Topic))
	})
	return out
}

// countOutstanding adds the counted statuses to o's totals and to topics: a
// (status, topic) that reached the bound is a lower bound, and so is its
// status's total.
func (o *OverviewCounts) countOutstanding(topics topicTally, outstanding []TopicStatus) {
	type group struct{ status, topic string }
	perGroup := map[group]int64{}
	for _, g := range outstanding {
		perGroup[group{g.Status, g.Topic}] += g.Events
	}
	for _, g := range outstanding {
		capped := perGroup[group{g.Status, g.Topic}] >= int64(o.Bounds.Outstanding)
		topics.put(g, Count{N: g.Events, AtLeast: capped})
		t := o.Totals[g.Status]
		o.Totals[g.Status] = Count{N: t.N + g.Events, AtLeast: t.AtLeast || capped}
	}
}

// estimateSampled adds SENT, which is not counted, to o's totals and to
// topics as estimated from the sample, and gives a counted total that is a
// lower bound the sample's estimate (Approx) when that is larger.
func (o *OverviewCounts) estimateSampled(topics topicTally, sampled []TopicStatus, estimate func(k int64) (n, e int64)) {
	inSampleBy := map[string]int64{}
	for _, g := range sampled {
		inSampleBy[g.Status] += g.Events
		if g.Status != "SENT" {
			continue
		}
		n, e := estimate(g.Events)
		topics.put(g, Count{N: n, Estimated: o.Sampled, Err: e})
	}
	if k := inSampleBy["SENT"]; k > 0 {
		n, e := estimate(k)
		o.Totals["SENT"] = Count{N: n, Estimated: o.Sampled, Err: e}
	}
	for st, t := range o.Totals {
		if n, e := estimate(inSampleBy[st]); t.AtLeast && n > t.N {
			t.Approx, t.Err = n, e
			o.Totals[st] = t
		}
	}
}

// Statuses are the delivery states in the order the console shows them.
func Statuses() []string { return slices.Clone(statusOrder) }

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
