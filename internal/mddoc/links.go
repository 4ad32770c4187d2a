package mddoc

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Page is a Markdown file read for its links and anchors.
type Page struct {
	Path    string          // relative to the root, with slashes: docs/running.md
	Anchors map[string]bool // every #fragment a heading (or an <a id>) makes
	Links   []Link
}

// Link is a link or image destination of a page, on its line.
type Link struct {
	Line int
	Dest string
}

var (
	fenceRe   = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	headingRe = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	codeRe    = regexp.MustCompile("(`+)(.+?)(`+)")
	// [text](dest) and ![alt](dest); the text may hold one level of
	// brackets ([`x`] or an image in a link).
	inlineRe = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDefRe = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlIDRe = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	tagRe    = regexp.MustCompile(`<[^>]+>`)
	schemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Parse reads a page's headings and links; code blocks and code spans
// hold neither.
func Parse(path, text string) Page {
	p := Page{Path: path, Anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
			case strings.HasPrefix(m[1], fence[:1]) && len(m[1]) >= len(fence) && strings.TrimSpace(line) == m[1]:
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			slug := Slug(m[2])
			if n, dup := seen[slug]; dup {
				seen[slug] = n + 1
				slug += "-" + strconv.Itoa(n+1)
			} else {
				seen[slug] = 0
			}
			p.Anchors[slug] = true
		}
		for _, m := range htmlIDRe.FindAllStringSubmatch(line, -1) {
			p.Anchors[m[1]] = true
		}
		plain := codeRe.ReplaceAllString(line, "")
		if m := refDefRe.FindStringSubmatch(plain); m != nil {
			p.Links = append(p.Links, Link{Line: i + 1, Dest: m[1]})
			continue
		}
		for _, m := range inlineRe.FindAllStringSubmatch(plain, -1) {
			p.Links = append(p.Links, Link{Line: i + 1, Dest: strings.Trim(m[1], "<>")})
		}
	}
	return p
}

// Slug is the #fragment GitHub gives a heading: its text as rendered
// (code spans, links and emphasis reduced to their text), lower-cased,
// every character that is not a letter, digit, mark, space, - or _
// removed, and spaces made -. A page's second heading of the same slug
// gets -1, its third -2 (Parse does that).
func Slug(heading string) string {
	text := codeRe.ReplaceAllString(heading, "$2")
	text = inlineRe.ReplaceAllStringFunc(text, func(l string) string {
		return l[strings.Index(l, "[")+1 : strings.LastIndex(l, "](")]
	})
	text = tagRe.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check resolves every relative link of pages (paths relative to root): the
// file it names must exist inside root, and its #anchor must be one a
// heading of the page it names makes. Links with a scheme (https:,
// mailto:) are not followed. It returns one error per link that does not
// resolve, saying where it is.
func Check(root string, paths []string) ([]error, error) {
	pages := map[string]Page{}
	load := func(path string) (Page, error) {
		if p, ok := pages[path]; ok {
			return p, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			return Page{}, err
		}
		p := Parse(path, string(b))
		pages[path] = p
		return p, nil
	}
	var errs []error
	for _, path := range paths {
		p, err := load(path)
		if err != nil {
			return nil, err
		}
		for _, l := range p.Links {
			if err := resolve(root, p, l, load); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %w", p.Path, l.Line, l.Dest, err))
			}
		}
	}
	return errs, nil
}

func resolve(root string, from Page, l Link, load func(string) (Page, error)) error {
	if schemeRe.MatchString(l.Dest) || strings.HasPrefix(l.Dest, "//") {
		return nil
	}
	target, fragment, _ := strings.Cut(l.Dest, "#")
	path := from.Path
	if target != "" {
		t, err := url.PathUnescape(target)
		if err != nil {
			return err
		}
		if strings.HasPrefix(t, "/") {
			return fmt.Errorf("an absolute path: write it relative to %s", from.Path)
		}
		path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from.Path), t)))
		if path == ".." || strings.HasPrefix(path, "../") {
			return fmt.Errorf("outside the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
			return fmt.Errorf("no file %s", path)
		}
	}
	if fragment == "" {
		return nil
	}
	if !strings.HasSuffix(path, ".md") {
		return fmt.Errorf("an #anchor in %s, which is not a Markdown page", path)
	}
	p, err := load(path)
	if err != nil {
		return err
	}
	if !p.Anchors[fragment] {
		return fmt.Errorf("no heading of %s makes the anchor #%s", path, fragment)
	}
	return nil
}
