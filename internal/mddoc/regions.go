// Package mddoc is the tooling of the Markdown documentation (README.md and
// docs/): the parts of pages generated from the code (regions), and the
// check that every relative link and #anchor resolves (links).
package mddoc

import (
	"fmt"
	"regexp"
	"strings"
)

// A region is a part of a page that a generator writes, between
//
//	<!-- BEGIN GENERATED: name ... -->
//	<!-- END GENERATED: name -->
//
// lines. Everything else on the page is written by hand.
var (
	beginRe = regexp.MustCompile(`(?m)^<!-- BEGIN GENERATED: ([a-z0-9-]+)[^\n]*-->\n`)
	endFmt  = "<!-- END GENERATED: %s -->"
)

// Begin is the line that opens region name; how says how to regenerate it.
func Begin(name, how string) string {
	return fmt.Sprintf("<!-- BEGIN GENERATED: %s (%s) -->", name, how)
}

// End is the line that closes region name.
func End(name string) string { return fmt.Sprintf(endFmt, name) }

// Regions lists the names of page's regions, in order; a region opened and
// not closed is an error.
func Regions(page string) ([]string, error) {
	var names []string
	for _, m := range beginRe.FindAllStringSubmatchIndex(page, -1) {
		name := page[m[2]:m[3]]
		if !strings.Contains(page[m[1]:], End(name)) {
			return nil, fmt.Errorf("region %s has no %q line", name, End(name))
		}
		names = append(names, name)
	}
	return names, nil
}

// Fill returns page with the body of each of its regions replaced by what
// gen makes of the region's name. gen's text is put between the region's
// lines as it is, ending with a newline.
func Fill(page string, gen func(name string) (string, error)) (string, error) {
	var b strings.Builder
	rest := page
	for {
		m := beginRe.FindStringSubmatchIndex(rest)
		if m == nil {
			b.WriteString(rest)
			return b.String(), nil
		}
		name := rest[m[2]:m[3]]
		body := rest[m[1]:]
		end := strings.Index(body, End(name))
		if end < 0 {
			return "", fmt.Errorf("region %s has no %q line", name, End(name))
		}
		text, err := gen(name)
		if err != nil {
			return "", fmt.Errorf("region %s: %w", name, err)
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		b.WriteString(rest[:m[1]])
		b.WriteString(text)
		rest = body[end:]
	}
}

// Cell escapes s for a cell of a Markdown table: a | would end the cell,
// and a newline the row.
func Cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
