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

type tallyKey struct {
	topic, outcome, reason string
	refused                bool // never sent to its topic
}

// NewTally makes an empty tally.
func (m *Metrics) NewTally() *Tally { return &Tally{m: m, counts: map[tallyKey]float64{}} }

// Add counts one event of topic with outcome (and reason, for Failed);
// refused says the event was never sent to its topic (invalid, or refused
// before sending), which gives the topic no label value of its own.
func (t *Tally) Add(topic, outcome, reason string, refused bool) {
	t.counts[tallyKey{topic, outcome, reason, refused}]++
}

// AddTable counts one event of a mapped table with outcome.
func (t *Tally) AddTable(table, outcome string) {
	if t.tables == nil {
		t.tables = map[[2]string]float64{}
	}
	t.tables[[2]string{table, outcome}]++
}

// OutcomeSink receives, at each Tally's Flush, how many events of a topic
// label (a topic, TopicOther or TopicRefused: the metrics' bound) the
// flushed group recorded SENT and FAILED: the per-minute counts of the
// console's History (relay/history.go). It is called with the metrics'
// lock held, so it must be quick and must not call back.
type OutcomeSink interface {
	AddOutcomes(label string, sent, failed int64)
}

// SendOutcomesTo has every Tally's Flush tell s how many events it counted
// SENT and FAILED, by topic label. Set it before counting.
func (m *Metrics) SendOutcomesTo(s OutcomeSink) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes = s
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
	// Topics sent to first: a refused event of one counts under its name.
	// Queued events are counted without their topic, which no check has
	// seen: it gets no label value.
	for k := range t.counts {
		if !k.refused && k.outcome != Queued {
			m.labelOf(k.topic, false)
		}
	}
	for k, n := range t.counts {
		switch k.outcome {
		case Queued:
			m.Queued.Add(n)
		case Failed:
			label := m.labelOf(k.topic, k.refused)
			m.addLocked(false, label, Failed+"/"+k.reason, n)
			if m.outcomes != nil {
				m.outcomes.AddOutcomes(label, 0, int64(n))
			}
		default:
			label := m.labelOf(k.topic, k.refused)
			m.addLocked(false, label, k.outcome, n)
			if m.outcomes != nil && k.outcome == Sent {
				m.outcomes.AddOutcomes(label, int64(n), 0)
			}
		}
		delete(t.counts, k)
	}
}
