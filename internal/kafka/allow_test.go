package kafka

import (
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
