package mddoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlug_IsTheAnchorGitHubMakes(t *testing.T) {
	t.Parallel()
	// Anchors GitHub gives these headings (github-slugger).
	cases := map[string]string{
		"Try it: the two commands":                                         "try-it-the-two-commands",
		"Delivery status: `outbox.deliveries`":                             "delivery-status-outboxdeliveries",
		"Starting, failing over, recovering":                               "starting-failing-over-recovering",
		"Metrics, health, readiness":                                       "metrics-health-readiness",
		"docker-compose.yml":                                               "docker-composeyml",
		"`--mode poll` and **bold** [a link](x.md)":                        "--mode-poll-and-bold-a-link",
		"Your own table: the Debezium-shaped drain (issue 32, 2026-11-26)": "your-own-table-the-debezium-shaped-drain-issue-32-2026-11-26",
		"outbox_relay_spilling & µs/event":                                 "outbox_relay_spilling--µsevent",
	}
	for heading, want := range cases {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestParse_DuplicateHeadingsGetNumbersAndCodeBlocksHoldNone(t *testing.T) {
	t.Parallel()
	p := Parse("a.md", "# Setup\n## Setup\n### Setup\n```\n# Not a heading\n[not](a-link.md)\n```\n"+
		"See [x](b.md#c) and `[code](d.md)`.\n[ref]: e.md\n![img](f.png \"title\")\n")
	for _, a := range []string{"setup", "setup-1", "setup-2"} {
		if !p.Anchors[a] {
			t.Errorf("anchor #%s is missing: %v", a, p.Anchors)
		}
	}
	if p.Anchors["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
	var dests []string
	for _, l := range p.Links {
		dests = append(dests, l.Dest)
	}
	if got, want := strings.Join(dests, " "), "b.md#c e.md f.png"; got != want {
		t.Errorf("links = %q, want %q", got, want)
	}
}

func TestCheck_NamesEveryLinkThatDoesNotResolve(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n[ok](docs/a.md#one) [ok](#top) [web](https://example.com/#x)\n"+
		"[bad file](docs/nope.md) [bad anchor](docs/a.md#two) [bad here](#nowhere) [out](../x.md)\n")
	write("docs/a.md", "# One\n[up](../README.md#top) [img](img/p.png)\n")
	write("docs/img/p.png", "")
	errs, err := Check(root, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`README.md:3: link "docs/nope.md": no file docs/nope.md`,
		`README.md:3: link "docs/a.md#two": no heading of docs/a.md makes the anchor #two`,
		`README.md:3: link "#nowhere": no heading of README.md makes the anchor #nowhere`,
		`README.md:3: link "../x.md": outside the repository`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFill_ReplacesOnlyTheRegions(t *testing.T) {
	t.Parallel()
	page := "intro\n" + Begin("a", "how") + "\nold\n" + End("a") + "\nmiddle\n" + Begin("b", "how") + "\n" + End("b") + "\nend\n"
	names, err := Regions(page)
	if err != nil || strings.Join(names, ",") != "a,b" {
		t.Fatalf("Regions = %v, %v; want a,b", names, err)
	}
	got, err := Fill(page, func(name string) (string, error) { return "new " + name, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := "intro\n" + Begin("a", "how") + "\nnew a\n" + End("a") + "\nmiddle\n" + Begin("b", "how") + "\nnew b\n" + End("b") + "\nend\n"
	if got != want {
		t.Errorf("Fill =\n%s\nwant:\n%s", got, want)
	}
	if _, err := Regions(Begin("c", "how") + "\nno end\n"); err == nil {
		t.Error("a region without its END line was accepted")
	}
}
