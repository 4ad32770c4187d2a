package metrics

import "testing"

// BenchmarkTallyGroupOf1000: what counting costs the write stage per status
// group of 1,000 sent events (two tally updates each).
func BenchmarkTallyGroupOf1000(b *testing.B) {
	m := New("bench")
	t := m.NewTally()
	t.Add("orders", Published, "")
	t.Flush()
	m.endScrape(m.beginScrape()) // the topic shown: its counts go to the counters
	b.ReportAllocs()
	for b.Loop() {
		for range 1000 {
			t.Add("orders", Published, "")
			t.Add("orders", Sent, "")
		}
		t.Flush()
	}
}
