package metrics

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BenchmarkTallyGroupOf1000: what counting costs the write stage per status
// group of 1,000 sent events (two tally updates each).
func BenchmarkTallyGroupOf1000(b *testing.B) {
	m := New("bench")
	t := m.NewTally()
	t.Add("orders", Published, "", false)
	t.Flush()
	m.endScrape(m.beginScrape()) // the topic shown: its counts go to the counters
	b.ReportAllocs()
	for b.Loop() {
		for range 1000 {
			t.Add("orders", Published, "", false)
			t.Add("orders", Sent, "", false)
		}
		t.Flush()
	}
}

// Topic labels come from event data, so they are bounded: a topic gets a
// label value of its own once an event was sent to it, up to the cap;
// events never sent to a topic without one count as (refused), those of
// topics past the cap as (other).
func TestTally_TopicLabelsAreBoundedWhateverTheTopicsWritten(t *testing.T) {
	m := New("test")
	m.LimitTopics(2)
	tl := m.NewTally()
	for _, topic := range []string{"orders", "billing", "audit", "ledger"} {
		tl.Add(topic, Published, "", false)
		tl.Add(topic, Sent, "", false)
		tl.Flush()
	}
	for i := range 5000 {
		tl.Add(fmt.Sprintf("refused-%d", i), Failed, "TOPIC_NOT_ALLOWED", true)
	}
	tl.Add("orders", Failed, "INVALID_EVENT", true) // a topic with a label keeps it
	tl.Add("refused-1", Published, "", false)       // past the cap
	tl.Add("queued-1", Queued, "", false)           // counted without a topic
	tl.Flush()
	m.DeadLettered("refused-2", true, DeadLetterSent)
	m.DeadLettered("billing", false, DeadLetterSent)
	m.DeadLettered("audit", false, DeadLetterRefused)
	m.endScrape(m.beginScrape()) // the labels shown at 0: their counts go to the counters

	want := map[string]float64{
		`sent{topic="orders"}`:                                 1,
		`sent{topic="billing"}`:                                1,
		`sent{topic="(other)"}`:                                2,
		`published{topic="(other)"}`:                           3,
		`failed{reason="TOPIC_NOT_ALLOWED",topic="(refused)"}`: 5000,
		`failed{reason="INVALID_EVENT",topic="orders"}`:        1,
		`dead_lettered{outcome="sent",topic="(refused)"}`:      1,
		`dead_lettered{outcome="sent",topic="billing"}`:        1,
		`dead_lettered{outcome="refused",topic="(other)"}`:     1,
	}
	got := map[string]float64{
		`sent{topic="orders"}`:                                 testutil.ToFloat64(m.sent.WithLabelValues("orders")),
		`sent{topic="billing"}`:                                testutil.ToFloat64(m.sent.WithLabelValues("billing")),
		`sent{topic="(other)"}`:                                testutil.ToFloat64(m.sent.WithLabelValues(TopicOther)),
		`published{topic="(other)"}`:                           testutil.ToFloat64(m.published.WithLabelValues(TopicOther)),
		`failed{reason="TOPIC_NOT_ALLOWED",topic="(refused)"}`: testutil.ToFloat64(m.failed.WithLabelValues(TopicRefused, "TOPIC_NOT_ALLOWED")),
		`failed{reason="INVALID_EVENT",topic="orders"}`:        testutil.ToFloat64(m.failed.WithLabelValues("orders", "INVALID_EVENT")),
		`dead_lettered{outcome="sent",topic="(refused)"}`:      testutil.ToFloat64(m.deadLettered.WithLabelValues(TopicRefused, "sent")),
		`dead_lettered{outcome="sent",topic="billing"}`:        testutil.ToFloat64(m.deadLettered.WithLabelValues("billing", "sent")),
		`dead_lettered{outcome="refused",topic="(other)"}`:     testutil.ToFloat64(m.deadLettered.WithLabelValues(TopicOther, "refused")),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	// orders, billing, (other), (refused): four label values per counter.
	for name, c := range map[string]prometheus.Collector{"published": m.published, "sent": m.sent, "retried": m.retried} {
		if n := testutil.CollectAndCount(c); n != 4 {
			t.Errorf("%s has %d series, want 4", name, n)
		}
	}
	if n := testutil.ToFloat64(m.Queued); n != 1 {
		t.Errorf("queued = %v, want 1", n)
	}
	// Each label value has a series at 0 for every failure reason.
	if n := testutil.CollectAndCount(m.failed); n != 4*len(FailureReasons) {
		t.Errorf("failed has %d series, want %d", n, 4*len(FailureReasons))
	}
}

// An event queued without being published (a spill, or behind its key) is
// counted without its topic, which no check has seen: it takes no label
// value from the cap.
func TestTally_AQueuedEventsTopicTakesNoLabelValue(t *testing.T) {
	m := New("test")
	tl := m.NewTally()
	for i := range 100 {
		tl.Add(fmt.Sprintf("unchecked-%d", i), Queued, "", false)
	}
	tl.Flush()
	if n := testutil.ToFloat64(m.Queued); n != 100 {
		t.Errorf("queued = %v, want 100", n)
	}
	if n := testutil.CollectAndCount(m.published); n != 0 {
		t.Errorf("%d topic series after queued events only, want none", n)
	}
}

// outcomeSums is an OutcomeSink that sums what it is told, by label, as the
// relay's per-minute counts do (a map under a mutex).
type outcomeSums struct {
	mu   sync.Mutex
	sums map[string][2]int64
}

func (s *outcomeSums) AddOutcomes(label string, sent, failed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.sums[label]
	s.sums[label] = [2]int64{c[0] + sent, c[1] + failed}
}

// BenchmarkTallyGroupOf1000WithOutcomes is BenchmarkTallyGroupOf1000 with
// the console History's per-minute counts told at each flush.
func BenchmarkTallyGroupOf1000WithOutcomes(b *testing.B) {
	m := New("bench")
	m.SendOutcomesTo(&outcomeSums{sums: map[string][2]int64{}})
	t := m.NewTally()
	t.Add("orders", Published, "", false)
	t.Flush()
	m.endScrape(m.beginScrape())
	b.ReportAllocs()
	for b.Loop() {
		for range 1000 {
			t.Add("orders", Published, "", false)
			t.Add("orders", Sent, "", false)
		}
		t.Flush()
	}
}

// The sink is told, at each flush, the SENT and FAILED events of each
// topic under its metrics label: 20,000 topics past a cap of 2 make three
// labels (two topics, (other)) and (refused), never 20,000. Published,
// retried and queued events are not its business.
func TestTally_TellsItsSinkTheSentAndFailedOfEachBoundedLabel(t *testing.T) {
	m := New("test")
	m.LimitTopics(2)
	sums := &outcomeSums{sums: map[string][2]int64{}}
	m.SendOutcomesTo(sums)
	tl := m.NewTally()
	for i := range 20000 {
		topic := fmt.Sprintf("topic-%d", i%20000)
		tl.Add(topic, Published, "", false)
		tl.Add(topic, Sent, "", false)
		if i%100 == 0 {
			tl.Add(topic, Failed, "MESSAGE_TOO_LARGE", false)
		}
		if i%1000 == 0 {
			tl.Flush()
		}
	}
	tl.Add("bad topic!", Failed, "INVALID_TOPIC", true)
	tl.Add("topic-5", Retried, "", false)
	tl.Add("topic-6", Queued, "", false)
	tl.Flush()
	var total [2]int64
	for _, c := range sums.sums {
		total[0], total[1] = total[0]+c[0], total[1]+c[1]
	}
	if len(sums.sums) != 4 || sums.sums[TopicRefused] != [2]int64{0, 1} || total != [2]int64{20000, 201} {
		t.Fatalf("the sink got %d labels, (refused) %v, in all %v sent and failed; want 4 labels, (refused) [0 1], [20000 201]: %v",
			len(sums.sums), sums.sums[TopicRefused], total, sums.sums)
	}
}
