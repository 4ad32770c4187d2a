package termsafe_test

import (
	"encoding/json"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

func TestString_EscapesWhatATerminalActsOnAndNothingElse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"orders":                       "orders",
		"commandes-éà-注文":              "commandes-éà-注文",
		`back\slash`:                   `back\slash`,
		"esc\x1b[2Jcleared":            `esc\x1b[2Jcleared`,
		"\x1b]0;pwned\x07title":        `\x1b]0;pwned\x07title`,
		"two\nrows\rover\ttab":         `two\x0arows\x0dover\x09tab`,
		"del\x7f":                      `del\x7f`,
		"c1 csi \u009b2J":              `c1 csi \u009b2J`,
		"raw byte \x9b2J":              `raw byte \x9b2J`,
		"bidi \u202egnp.exe\u202c":     `bidi \u202egnp.exe\u202c`,
		"isolate \u2066x\u2069 \u2028": `isolate \u2066x\u2069 \u2028`,
		"":                             "",
	} {
		if got := termsafe.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText_KeepsNewlinesAndTabs(t *testing.T) {
	t.Parallel()
	if got, want := termsafe.Text("a\n\tb\x1b[2J\r"), "a\n\tb\\x1b[2J\\x0d"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestJSON_EscapesDELAndC1AsJSONReadsThemBack(t *testing.T) {
	t.Parallel()
	in := map[string]string{"topic": "a\x1b[2J\x7f\u009b\u202eb", "key": "é"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := termsafe.JSON(b)
	for _, c := range out {
		if c < 0x20 || c == 0x7f {
			t.Fatalf("JSON(%s) = %s holds control byte %#x", b, out, c)
		}
	}
	if string(out) != `{"key":"é","topic":"a\u001b[2J\u007f\u009b\u202eb"}` {
		t.Errorf("JSON(%s) = %s", b, out)
	}
	if indented, _ := json.MarshalIndent(in, "", "\t"); string(termsafe.JSON(indented)) !=
		"{\n\t\"key\": \"é\",\n\t\"topic\": \"a\\u001b[2J\\u007f\\u009b\\u202eb\"\n}" {
		t.Errorf("JSON(%s) = %s, want its indentation kept", indented, termsafe.JSON(indented))
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["topic"] != in["topic"] || back["key"] != in["key"] {
		t.Errorf("JSON(%s) = %s reads back as %q (%v), want %q", b, out, back, err, in)
	}
}
