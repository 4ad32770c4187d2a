// Package termsafe escapes text from the database before a terminal shows
// it: a writer's topic, key or event type may hold escape sequences that
// would clear the screen, rewrite rows or set the window title.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String returns s with every character a terminal acts on escaped, so
// that one table cell stays one cell on one row: C0 controls (tab and
// newline included) and DEL as \xNN (ESC is \x1b), C1 controls, line
// separators and bidirectional overrides as \uNNNN, and each byte that is
// not UTF-8 as \xNN. Printable text, backslashes included, is unchanged.
func String(s string) string { return escape(s, cell) }

// Text is String for free text printed as lines (an error message): it
// keeps newlines and tabs.
func Text(s string) string { return escape(s, lines) }

// JSON escapes, in encoding/json output (which escapes C0 controls and
// replaces bytes that are not UTF-8 already), DEL, C1 controls and
// bidirectional overrides as \u escapes: JSON reads them back as the same
// characters, a terminal shows them as text.
func JSON(b []byte) []byte {
	s := string(b)
	if e := escape(s, json); e != s {
		return []byte(e)
	}
	return b
}

// mode is what escape is for.
type mode int

const (
	cell  mode = iota // a table cell: everything
	lines             // lines of text: newlines and tabs stay
	json              // encoding/json output, maybe indented: \u escapes only
)

func escape(s string, m mode) string {
	var out strings.Builder
	done := 0 // s[:done] is in out
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case m != cell && (r == '\n' || r == '\t'): // json: indentation
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, s[i])
		case m == json && (r == 0x7f || unsafeRune(r)):
			esc = fmt.Sprintf(`\u%04x`, r)
		case r < 0x20 || r == 0x7f:
			esc = fmt.Sprintf(`\x%02x`, r)
		case unsafeRune(r):
			esc = fmt.Sprintf(`\u%04x`, r)
		}
		if esc != "" {
			out.WriteString(s[done:i])
			out.WriteString(esc)
			done = i + size
		}
		i += size
	}
	if done == 0 {
		return s
	}
	out.WriteString(s[done:])
	return out.String()
}

// unsafeRune reports the characters above ASCII that a terminal or a
// reader's eye acts on: C1 controls (U+009B is CSI), the line and
// paragraph separators, and the bidirectional marks, embeddings,
// overrides and isolates that reorder what follows them.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f,
		r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x2028 && r <= 0x202e,
		r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
