package mddoc

import (
	"path/filepath"
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
