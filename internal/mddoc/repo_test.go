package mddoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepoDocs_EveryRelativeLinkAndAnchorResolves checks README.md and
// docs/*.md: every link to a file of the repository finds it, and every
// #anchor a heading of its page (no network: links with a scheme are not
// followed).
func TestRepoDocs_EveryRelativeLinkAndAnchorResolves(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
	}
	errs, err := Check(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// README.md is the front page a newcomer reads in ten minutes: what the
// relay does, the two commands, a tour, production in brief and a map of
// docs/. The rest belongs on a page of docs/.
func TestRepoDocs_TheREADMEIsShort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to its page in docs/", n, readmeMaxLines)
	}
}

// readmeMaxLines is the README's length at most (issue 45).
const readmeMaxLines = 250

// Each page of docs/ starts, under its title, with what the reader can do
// after reading it, so that a reader knows at once whether it is the page.
func TestRepoDocs_EveryPageSaysWhatItsReaderCanDoAfterIt(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		title, rest, _ := strings.Cut(string(b), "\n")
		if !strings.HasPrefix(title, "# ") || !strings.HasPrefix(strings.TrimLeft(rest, "\n"), "After reading this page you ") {
			t.Errorf("%s: start with its title (# ...) and a paragraph \"After reading this page you can ...\"", filepath.Base(p))
		}
	}
}
