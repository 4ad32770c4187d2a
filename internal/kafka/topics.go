package kafka

import (
	"fmt"
	"sync"
	"time"
)

// badTopicTTL is how long a topic found missing or forbidden stays so before
// it is looked up again.
const badTopicTTL = 5 * time.Second

// maxBadTopics bounds the topics remembered missing or forbidden: a writer
// can name any number of them.
const maxBadTopics = 1_000

// topicChecker fails events for invalid, refused, missing or forbidden
// topics before they reach the producer. Otherwise a burst of them would
// trip sarama's own per-topic breaker, whose "circuit breaker is open"
// cannot be told apart from a cluster outage, and would pause every other
// event.
type topicChecker struct {
	allow  *Allowlist // nil: every topic but system ones
	lookup func(string) ([]int32, error)
	mu     sync.Mutex
	bad    map[string]badTopic
}

type badTopic struct {
	reason string
	err    error
	until  time.Time
}

// check returns the failure reason and the error for a message no record
// can be delivered for, or a nil error: a topic name Kafka does not allow,
// a topic the allowlist refuses (the dead-letter topic takes dead letters
// only), or one the cluster's metadata says is missing or forbidden.
// Unavailability is not decided here: the send finds it.
func (c *topicChecker) check(m *Message) (string, error) {
	topic := m.Record.Topic
	if err := CheckTopicName(topic); err != nil {
		return ReasonInvalidTopic, err
	}
	allow := c.allow.Check
	if m.deadLetter {
		allow = c.allow.CheckDeadLetter
	}
	if err := allow(topic); err != nil {
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

// forget drops what is remembered of topic: an operator's resend after
// fixing the cause must not meet the old answer.
func (c *topicChecker) forget(topic string) {
	c.mu.Lock()
	delete(c.bad, topic)
	c.mu.Unlock()
}

// refresh looks the topic up again, whatever is remembered.
func (c *topicChecker) refresh(topic string) (string, error) {
	_, err := c.lookup(topic)
	if err == nil {
		c.forget(topic)
		return "", nil
	}
	class, reason := classify(err)
	if class != classMessage {
		return "", nil
	}
	err = fmt.Errorf("topic %q: %w", topic, err)
	now := time.Now()
	c.mu.Lock()
	if len(c.bad) >= maxBadTopics {
		for t, b := range c.bad {
			if !now.Before(b.until) {
				delete(c.bad, t)
			}
		}
	}
	if len(c.bad) < maxBadTopics {
		c.bad[topic] = badTopic{reason: reason, err: err, until: now.Add(badTopicTTL)}
	}
	c.mu.Unlock()
	return reason, err
}
