package mapping

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlclark/regexp2"
)

// TopicRouter routes a value to a topic as Kafka Connect's RegexRouter
// does with Java's java.util.regex, which Debezium's route.topic.regex and
// route.topic.replacement go through: when the regex matches the whole
// value (Matcher.matches()), the topic is Matcher.replaceFirst(replacement),
// which replaces the first match find() gives (with alternation it can be
// shorter than the whole value: the rest is kept); otherwise the value
// itself is the topic. The replacement is Java's: $n (as many digits as
// name a group), ${name}, \ to take the next character literally.
//
// Go's regexp differs (leftmost-first without backtracking to a full
// match, $name reading "$1_events_" as one name), so the regex runs on
// regexp2, whose backtracking engine finds what Java finds for the syntax
// both share.
type TopicRouter struct {
	pattern, replacement string
	find, whole          *regexp2.Regexp
	groups               []string // Java's group numbers 1..n: a name, or "" for an unnamed group
	unnamed              []int    // Java's number -> regexp2's, for unnamed groups (regexp2 numbers them first)
	parts                []replacementPart
	// routed remembers the topics of the values seen (an outbox table has
	// few: its aggregate types), up to routedMax, so the regex runs once a
	// value, not once an event.
	mu     sync.Mutex
	routed map[string]string
}

// routedMax bounds what a TopicRouter remembers; values past it are
// routed each time.
const routedMax = 4096

// replacementPart is literal text or a group of the match.
type replacementPart struct {
	text  string
	group int // Java's group number; 0 with text: literal
	name  string
}

// routeTimeout bounds one match, against a regex that backtracks without
// end: the event then fails with the reason.
const routeTimeout = 100 * time.Millisecond

// NewTopicRouter compiles pattern and replacement as Java would. A
// replacement naming a group the regex lacks is refused here: Java would
// throw at the first matching record.
func NewTopicRouter(pattern, replacement string) (*TopicRouter, error) {
	groups, err := javaGroups(pattern)
	if err != nil {
		return nil, err
	}
	r := &TopicRouter{pattern: pattern, replacement: replacement, groups: groups}
	if r.find, err = regexp2.Compile(pattern, regexp2.None); err != nil {
		return nil, err
	}
	if r.whole, err = regexp2.Compile(`\A(?:`+pattern+`)\z`, regexp2.None); err != nil {
		return nil, err
	}
	r.find.MatchTimeout, r.whole.MatchTimeout = routeTimeout, routeTimeout
	r.unnamed = make([]int, len(groups)+1)
	n := 0
	for i, name := range groups {
		if name == "" {
			n++
			r.unnamed[i+1] = n
		}
	}
	if r.parts, err = parseJavaReplacement(replacement, groups); err != nil {
		return nil, fmt.Errorf("replacement %q: %w", replacement, err)
	}
	return r, nil
}

// String is the regex, as configured.
func (r *TopicRouter) String() string { return r.pattern }

// Replacement is the replacement, as configured.
func (r *TopicRouter) Replacement() string { return r.replacement }

// Route returns the topic of value.
func (r *TopicRouter) Route(value string) (string, error) {
	r.mu.Lock()
	topic, ok := r.routed[value]
	r.mu.Unlock()
	if ok {
		return topic, nil
	}
	topic, err := r.route(value)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	if r.routed == nil {
		r.routed = map[string]string{}
	}
	if len(r.routed) < routedMax {
		r.routed[value] = topic
	}
	r.mu.Unlock()
	return topic, nil
}

// route runs the regex on value: Java's RegexRouter.
func (r *TopicRouter) route(value string) (string, error) {
	m, err := r.whole.FindStringMatch(value)
	if err != nil {
		return "", fmt.Errorf("route.topic.regex %q on %q: %w", r.pattern, value, err)
	}
	if m == nil {
		return value, nil // RegexRouter keeps the topic
	}
	if m, err = r.find.FindStringMatch(value); err != nil || m == nil {
		return "", fmt.Errorf("route.topic.regex %q on %q: no first match: %v", r.pattern, value, err)
	}
	var b strings.Builder
	runes := []rune(value) // regexp2 indexes runes
	b.WriteString(string(runes[:m.Index]))
	for _, p := range r.parts {
		var g *regexp2.Group
		switch {
		case p.group == -1:
			b.WriteString(m.String())
			continue
		case p.name != "":
			g = m.GroupByName(p.name)
		case p.group > 0 && r.groups[p.group-1] != "":
			g = m.GroupByName(r.groups[p.group-1])
		case p.group > 0:
			g = m.GroupByNumber(r.unnamed[p.group])
		default:
			b.WriteString(p.text)
			continue
		}
		if g != nil && len(g.Captures) > 0 {
			b.WriteString(g.String())
		}
	}
	b.WriteString(string(runes[m.Index+m.Length:]))
	return b.String(), nil
}

// javaGroups lists a Java regex's capturing groups in Java's numbering:
// each one's name, "" when it has none.
func javaGroups(p string) ([]string, error) {
	var groups []string
	class := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			if strings.HasPrefix(p[i:], `\Q`) { // quoted up to \E
				end := strings.Index(p[i+2:], `\E`)
				if end < 0 {
					return groups, nil
				}
				i += end + 3
				continue
			}
			i++
		case c == '[':
			class++
		case c == ']' && class > 0:
			class--
		case c == '(' && class == 0:
			rest := p[i+1:]
			switch {
			case !strings.HasPrefix(rest, "?"):
				groups = append(groups, "")
			case strings.HasPrefix(rest, "?<") && len(rest) > 2 && rest[2] != '=' && rest[2] != '!':
				end := strings.IndexByte(rest, '>')
				if end < 0 {
					return nil, errors.New("unclosed group name")
				}
				groups = append(groups, rest[2:end])
			}
		}
	}
	return groups, nil
}

// parseJavaReplacement reads a replacement as Matcher.appendReplacement
// does, refusing what it would throw on.
func parseJavaReplacement(s string, groups []string) ([]replacementPart, error) {
	var parts []replacementPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing")
			}
			lit.WriteByte(s[i])
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("illegal group reference: group index is missing")
			}
			if s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, errors.New("named capturing group is missing trailing '}'")
				}
				name := s[i+1 : i+end]
				found := false
				for _, g := range groups {
					found = found || g == name
				}
				if name == "" || !found {
					return nil, fmt.Errorf("no group with name {%s}", name)
				}
				flush()
				parts = append(parts, replacementPart{name: name})
				i += end
				continue
			}
			if s[i] < '0' || s[i] > '9' {
				return nil, errors.New("illegal group reference")
			}
			ref := int(s[i] - '0')
			for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				next := ref*10 + int(s[i+1]-'0')
				if next > len(groups) {
					break
				}
				ref = next
				i++
			}
			if ref > len(groups) {
				return nil, fmt.Errorf("no group %d", ref)
			}
			flush()
			if ref == 0 {
				parts = append(parts, replacementPart{group: -1})
			} else {
				parts = append(parts, replacementPart{group: ref})
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}
