package kafka

import (
	"strconv"
	"strings"
	"testing"
)

func TestAllowlist_AllowsNamesAndPatternsAndInternalTopicsOnlyByName(t *testing.T) {
	cases := []struct {
		rules   []string
		topic   string
		allowed bool
		says    string
	}{
		{nil, "orders", true, ""},
		{nil, "__consumer_offsets", false, `Kafka internal topic`},
		{[]string{"orders", "billing.*"}, "orders", true, ""},
		{[]string{"orders", "billing.*"}, "billing.invoice", true, ""},
		{[]string{"orders", "billing.*"}, "ordersx", false, `--topics allows orders, billing.*`},
		{[]string{"orders", "billing.*"}, "billing", false, `topic "billing" is not allowed`},
		{[]string{"*"}, "__transaction_state", false, `only when --topics names it exactly`},
		{[]string{"*", "__consumer_offsets"}, "__consumer_offsets", true, ""},
		{[]string{"orders"}, "orders\n\"x'", false, `topic "orders\n\"x'"`}, // quoted, escapes and all
		// The ecosystem's system topics, like Kafka's own: by exact name only.
		{nil, "_schemas", false, `system topic of the Kafka ecosystem`},
		{nil, "_confluent-command", false, `only when --topics names it exactly`},
		{nil, "connect-configs", false, `Kafka Connect storage topic`},
		{nil, "connect-offsets", false, `Kafka Connect storage topic`},
		{nil, "connect-status", false, `Kafka Connect storage topic`},
		{nil, "connect-statusx", true, ""},
		{[]string{"*"}, "_schemas", false, `only when --topics names it exactly`},
		{[]string{"connect-*"}, "connect-offsets", false, `only when --topics names it exactly`},
		{[]string{"orders", "_schemas", "connect-configs"}, "_schemas", true, ""},
		{[]string{"orders", "_schemas", "connect-configs"}, "connect-configs", true, ""},
	}
	for _, c := range cases {
		a, err := NewAllowlist(c.rules)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the remembered answer is the same
			err := a.Check(c.topic)
			if (err == nil) != c.allowed || err != nil && !strings.Contains(err.Error(), c.says) {
				t.Errorf("rules %q, topic %q: %v; want allowed %v, saying %q", c.rules, c.topic, err, c.allowed, c.says)
			}
		}
	}
	if _, err := NewAllowlist([]string{"orders", "bad[pattern"}); err == nil || !strings.Contains(err.Error(), `--topics: "bad[pattern"`) {
		t.Errorf("a bad pattern: %v", err)
	}
	var none *Allowlist
	if none.Check("orders") != nil || none.Check("__consumer_offsets") == nil {
		t.Error("no list: every topic but internal ones")
	}
}

// The dead-letter topic takes the relay's dead letters whatever the rules,
// and events only when the rules name it exactly.
func TestAllowlist_TheDeadLetterTopicTakesDeadLettersOnly(t *testing.T) {
	cases := []struct {
		rules       []string
		eventsToDLT bool
	}{
		{nil, false},
		{[]string{"orders"}, false},
		{[]string{"orders*"}, false}, // a pattern is not enough
		{[]string{"orders", "orders.dlq"}, true},
	}
	for _, c := range cases {
		a, err := NewAllowlist(c.rules)
		if err != nil {
			t.Fatal(err)
		}
		a.AllowDeadLetters("orders.dlq")
		if err := a.CheckDeadLetter("orders.dlq"); err != nil {
			t.Errorf("rules %q: a dead letter refused: %v", c.rules, err)
		}
		for range 2 { // the remembered answer is the same
			err := a.Check("orders.dlq")
			if (err == nil) != c.eventsToDLT || err != nil && !strings.Contains(err.Error(), "dead-letter topic") {
				t.Errorf("rules %q: an event for the dead-letter topic: %v, want allowed %v", c.rules, err, c.eventsToDLT)
			}
		}
		if err := a.CheckDeadLetter("payments"); err == nil && len(c.rules) > 0 {
			t.Errorf("rules %q: a dead letter for another topic is allowed", c.rules)
		}
	}
}

func TestCheckTopicName_IsKafkasRule(t *testing.T) {
	valid := []string{"orders", "a", "Orders.V2_x-y", strings.Repeat("a", 249), "...", "_schemas"}
	invalid := []string{"", ".", "..", "orders.*", "ｏｒｄｅｒｓ", "ordérs", strings.Repeat("a", 250), "bad topic", "a/b", "a\x00b", "a:b"}
	for _, n := range valid {
		if err := CheckTopicName(n); err != nil {
			t.Errorf("%.40q: %v, want valid", n, err)
		}
	}
	for _, n := range invalid {
		if err := CheckTopicName(n); err == nil || !strings.Contains(err.Error(), TopicNameRule) {
			t.Errorf("%.40q: %v, want the rule", n, err)
		}
	}
}

func TestReservedHeader_NamesTheRelayWrites(t *testing.T) {
	cases := []struct {
		name             string
		plain, cloudMode bool // reserved in plain mode, in CloudEvents mode
	}{
		{"outbox-event-id", true, true},
		{"OUTBOX-EVENT-TYPE", true, true},
		{"outbox-event-anything", true, true},
		{"outbox-dlt-reason", true, true},
		{"__connect.errors.topic", true, true},
		{"__connect.errors.exception.message", true, true},
		{"ce_id", false, true},
		{"CE_Type", false, true},
		{"content-type", false, true},
		{"Content-Type", false, true},
		{"app", false, false},
		{"outbox-event", false, false},
		{"ce-id", false, false},
		{"content-types", false, false},
		{"traceparent", false, false},
	}
	for _, c := range cases {
		for _, ce := range []bool{false, true} {
			want := c.plain
			if ce {
				want = c.cloudMode
			}
			err := ReservedHeader(c.name, ce)
			if (err != nil) != want || err != nil && !strings.Contains(err.Error(), strconv.Quote(c.name)) {
				t.Errorf("%q (CloudEvents %v): %v, want reserved %v", c.name, ce, err, want)
			}
		}
	}
}
