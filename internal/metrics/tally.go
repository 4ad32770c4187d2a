package metrics

// Outcomes counted per topic.
const (
	Published = "published"
	Sent      = "sent"
	Retried   = "retried"
	Failed    = "failed"
	// Queued: not published; given a PENDING row for the poller (a spill,
	// or behind an earlier event of its key). Counted without a topic.
	Queued = "queued"
)

// Tally counts the outcomes of a group of events and adds them to the
// counters at once, so the hot path looks each topic up once per group,
// not once per event. A Tally is used by one goroutine.
type Tally struct {
	m      *Metrics
	counts map[tallyKey]float64
	tables map[[2]string]float64 // mapped tables: table, outcome
}

type tallyKey struct{ topic, outcome, reason string }

// NewTally makes an empty tally.
func (m *Metrics) NewTally() *Tally { return &Tally{m: m, counts: map[tallyKey]float64{}} }

// Add counts one event of topic with outcome (and reason, for Failed).
func (t *Tally) Add(topic, outcome, reason string) { t.counts[tallyKey{topic, outcome, reason}]++ }

// AddTable counts one event of a mapped table with outcome.
func (t *Tally) AddTable(table, outcome string) {
	if t.tables == nil {
		t.tables = map[[2]string]float64{}
	}
	t.tables[[2]string{table, outcome}]++
}

// Flush adds the counts to the counters and empties the tally.
func (t *Tally) Flush() {
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, n := range t.tables {
		m.addLocked(true, k[0], k[1], n)
		delete(t.tables, k)
	}
	for k, n := range t.counts {
		switch k.outcome {
		case Queued:
			m.Queued.Add(n)
		case Failed:
			m.addLocked(false, k.topic, Failed+"/"+k.reason, n)
		default:
			m.addLocked(false, k.topic, k.outcome, n)
		}
		delete(t.counts, k)
	}
}
