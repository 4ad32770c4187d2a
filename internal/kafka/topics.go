package kafka

import (
	"fmt"
	"sync"
	"time"
)

// badTopicTTL is how long a topic found missing or forbidden stays so before
// it is looked up again.
const badTopicTTL = 5 * time.Second

// topicChecker fails events for missing, invalid or forbidden topics before
// they reach the producer. Otherwise a burst of them would trip sarama's own
// per-topic breaker, whose "circuit breaker is open" cannot be told apart
// from a cluster outage, and would pause every other event.
type topicChecker struct {
	allow  *Allowlist // nil: every topic but internal ones
	lookup func(string) ([]int32, error)
	mu     sync.Mutex
	bad    map[string]badTopic
}

type badTopic struct {
	reason string
	err    error
	until  time.Time
}

// check returns the failure reason and the broker's error for a topic no
// event can be delivered to, or a nil error. Unavailability is not decided
// here: the send finds it.
func (c *topicChecker) check(topic string) (string, error) {
	if err := c.allow.Check(topic); err != nil {
		return ReasonTopicNotAllowed, err
	}
	c.mu.Lock()
	b, ok := c.bad[topic]
	c.mu.Unlock()
	if ok && time.Now().Before(b.until) {
		return b.reason, b.err
	}
	return c.refresh(topic)
}

// refresh looks the topic up again, whatever is remembered: an operator's
// resend after fixing the cause must not meet the old answer.
func (c *topicChecker) refresh(topic string) (string, error) {
	_, err := c.lookup(topic)
	if err == nil {
		c.mu.Lock()
		delete(c.bad, topic)
		c.mu.Unlock()
		return "", nil
	}
	class, reason := classify(err)
	if class != classMessage {
		return "", nil
	}
	err = fmt.Errorf("topic %q: %w", topic, err)
	c.mu.Lock()
	c.bad[topic] = badTopic{reason: reason, err: err, until: time.Now().Add(badTopicTTL)}
	c.mu.Unlock()
	return reason, err
}
