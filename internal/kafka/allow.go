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
// patterns in path.Match syntax (orders.*, payments-?). System topics
// (Kafka's internal __*, the ecosystem's _*, Kafka Connect's connect-configs,
// connect-offsets and connect-status) are refused unless named exactly, even
// by an empty list, which allows every other topic. The dead-letter topic
// takes the relay's dead letters whatever the rules, and events only when
// named exactly.
type Allowlist struct {
	rules []string
	names map[string]bool
	globs []string

	mu      sync.Mutex
	allowed map[string]bool // topics found allowed; bounded by maxAllowed
	// deadLetters is the dead-letter topic (--dead-letter-topic), "" for
	// none.
	deadLetters string
}

// maxAllowed bounds the topics an allowlist remembers it allowed. Refusals
// are not remembered: a writer can make any number of distinct ones.
const maxAllowed = 10_000

// connectTopics are Kafka Connect's default storage topics in distributed
// mode: a record written there changes connectors' configurations, offsets
// or status.
var connectTopics = map[string]bool{"connect-configs": true, "connect-offsets": true, "connect-status": true}

// NewAllowlist checks rules and returns their allowlist.
func NewAllowlist(rules []string) (*Allowlist, error) {
	a := &Allowlist{names: map[string]bool{}, allowed: map[string]bool{}}
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

// Check returns nil when an event may be published to topic, else an error
// naming the rule that refuses it.
func (a *Allowlist) Check(topic string) error {
	if a == nil { // no list: every topic but the system ones
		return system(topic)
	}
	a.mu.Lock()
	ok := a.allowed[topic]
	a.mu.Unlock()
	if ok {
		return nil
	}
	if err := a.decide(topic); err != nil {
		return err
	}
	a.mu.Lock()
	if len(a.allowed) < maxAllowed {
		a.allowed[topic] = true
	}
	a.mu.Unlock()
	return nil
}

// CheckDeadLetter returns nil when the relay may publish a dead letter to
// topic: the dead-letter topic.
func (a *Allowlist) CheckDeadLetter(topic string) error {
	if a != nil && a.deadLetters != "" && topic == a.deadLetters {
		return nil
	}
	return a.Check(topic)
}

func (a *Allowlist) decide(topic string) error {
	if a.names[topic] {
		return nil
	}
	if err := system(topic); err != nil {
		return err
	}
	if a.deadLetters != "" && topic == a.deadLetters {
		return fmt.Errorf("topic %q is the dead-letter topic (--dead-letter-topic): it takes the relay's dead letters only; "+
			"an event is published to it only when --topics names it exactly", topic)
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

// system refuses the topics of Kafka and its ecosystem, which only an
// exact rule allows: Kafka's internal topics (__consumer_offsets,
// __transaction_state, ...), those of other tools, whose names start with
// "_" (Schema Registry's _schemas, Confluent's _confluent-*), and Kafka
// Connect's storage topics.
func system(topic string) error {
	const exactly = "the relay publishes to one only when --topics names it exactly"
	switch {
	case strings.HasPrefix(topic, "__"):
		return fmt.Errorf("topic %q is a Kafka internal topic (its name starts with \"__\"): %s", topic, exactly)
	case strings.HasPrefix(topic, "_"):
		return fmt.Errorf("topic %q is a system topic of the Kafka ecosystem (its name starts with \"_\", as Schema Registry's "+
			"_schemas and Confluent's _confluent-* do): %s", topic, exactly)
	case connectTopics[topic]:
		return fmt.Errorf("topic %q is a Kafka Connect storage topic: %s", topic, exactly)
	}
	return nil
}

// AllowDeadLetters makes topic the dead-letter topic: the relay's dead
// letters go there whatever the rules, which need not name it; events go
// there only when the rules name it exactly.
func (a *Allowlist) AllowDeadLetters(topic string) { a.deadLetters = topic }

// maxTopicLength is the longest topic name Kafka allows.
const maxTopicLength = 249

// TopicNameRule is what Kafka allows a topic's name (CheckTopicName).
const TopicNameRule = "a Kafka topic name is 1 to 249 of the ASCII letters, digits, '.', '_' and '-', and not \".\" or \"..\""

// CheckTopicName returns nil when Kafka allows topic as a topic's name: 1
// to 249 ASCII letters, digits, '.', '_' and '-', and not "." or "..".
// Kafka refuses any other, so an event for one is never sent.
func CheckTopicName(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("the topic is empty: %s", TopicNameRule)
	case len(topic) > maxTopicLength:
		return fmt.Errorf("the topic %q... is %d bytes long: %s", topic[:40], len(topic), TopicNameRule)
	case topic == "." || topic == "..":
		return fmt.Errorf("the topic is %q: %s", topic, TopicNameRule)
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("the topic %q is not a valid name: %s", topic, TopicNameRule)
		}
	}
	return nil
}
