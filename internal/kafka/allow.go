package kafka

import (
	"fmt"
	"path"
	"strings"
	"sync"
)

// ReasonTopicNotAllowed fails an event whose topic --topics does not allow.
const ReasonTopicNotAllowed = "TOPIC_NOT_ALLOWED"

// Allowlist is the topics the relay may publish to (--topics): names, and
// patterns in path.Match syntax (orders.*, payments-?). Kafka's internal
// topics (names starting with "__") are refused unless named exactly, even
// by an empty list, which allows every other topic.
type Allowlist struct {
	rules []string
	names map[string]bool
	globs []string

	mu      sync.Mutex
	decided map[string]error // topic -> nil (allowed) or why not; bounded by maxDecided
	always  string           // allowed whatever the rules: the dead-letter topic
}

// maxDecided bounds the topics an allowlist remembers its answer for.
const maxDecided = 10_000

// NewAllowlist checks rules and returns their allowlist.
func NewAllowlist(rules []string) (*Allowlist, error) {
	a := &Allowlist{names: map[string]bool{}, decided: map[string]error{}}
	for _, r := range rules {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if _, err := path.Match(r, ""); err != nil {
			return nil, fmt.Errorf("--topics: %q is not a valid pattern: %w", r, err)
		}
		a.rules = append(a.rules, r)
		if strings.ContainsAny(r, `*?[\`) {
			a.globs = append(a.globs, r)
		} else {
			a.names[r] = true
		}
	}
	return a, nil
}

// Rules are the allowlist's rules as given, without blanks.
func (a *Allowlist) Rules() []string { return a.rules }

// Check returns nil when topic may be published to, else an error naming
// the rule that refuses it.
func (a *Allowlist) Check(topic string) error {
	if a == nil { // no list: every topic but the internal ones
		return internal(topic)
	}
	if a.always != "" && topic == a.always {
		return nil
	}
	a.mu.Lock()
	err, ok := a.decided[topic]
	a.mu.Unlock()
	if ok {
		return err
	}
	err = a.decide(topic)
	a.mu.Lock()
	if len(a.decided) < maxDecided {
		a.decided[topic] = err
	}
	a.mu.Unlock()
	return err
}

func (a *Allowlist) decide(topic string) error {
	if a.names[topic] {
		return nil
	}
	if err := internal(topic); err != nil {
		return err
	}
	if len(a.rules) == 0 {
		return nil
	}
	for _, g := range a.globs {
		if ok, _ := path.Match(g, topic); ok {
			return nil
		}
	}
	return fmt.Errorf("topic %q is not allowed: --topics allows %s", topic, strings.Join(a.rules, ", "))
}

// internal refuses Kafka's internal topics (__consumer_offsets,
// __transaction_state, ...), which only an exact rule allows.
func internal(topic string) error {
	if strings.HasPrefix(topic, "__") {
		return fmt.Errorf("topic %q is a Kafka internal topic (its name starts with \"__\"): the relay publishes to one "+
			"only when --topics names it exactly", topic)
	}
	return nil
}

// AlwaysAllow allows topic whatever the rules: the dead-letter topic, which
// --topics need not name.
func (a *Allowlist) AlwaysAllow(topic string) { a.always = topic }
