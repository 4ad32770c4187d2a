package mapping

import "testing"

// BenchmarkTopicRouter: the cost of routing one event by Debezium's default
// route.topic.regex, a value seen before.
func BenchmarkTopicRouter(b *testing.B) {
	r, err := NewTopicRouter("(?<routedByValue>.*)", "outbox.event.${routedByValue}")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Route("Order"); err != nil {
			b.Fatal(err)
		}
	}
}
