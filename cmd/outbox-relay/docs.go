package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/mddoc"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/relay"
)

//go:generate go run . docs --dir ../../docs

// regenerate is how a reader of a generated region makes it again.
const regenerate = "outbox-relay docs; edit the code, then run: go generate ./cmd/outbox-relay"

// documented are the commands the configuration reference lists, in its
// order.
var documented = []string{"run", "migrate", "status", "failed", "resend", "skip", "held", "purge", "console"}

// docsCmd writes the parts of the documentation made from the code (a
// hidden command, for go generate): the configuration reference from the
// commands' flags, the metrics, the failure reasons. Each is a region of a
// page in --dir (mddoc.Begin, mddoc.End); the rest of the page is kept.
func docsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := newFlags("docs", getenv)
	fs.Describe("", "", "Rewrite the generated parts of the documentation's pages (the configuration reference,\n"+
		"the metrics, the failure reasons) from this binary.")
	var dir string
	var check bool
	fs.String(&dir, "dir", "docs", "the directory of the documentation's pages")
	fs.Bool(&check, "check", false, "write nothing: list the pages whose generated parts differ, and fail if any does")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	stale, err := writeDocs(ctx, dir, check)
	for _, page := range stale {
		if check {
			fmt.Fprintf(stdout, "%s: its generated parts are not what the binary says\n", page)
		} else {
			fmt.Fprintf(stdout, "wrote %s\n", page)
		}
	}
	if err == nil && check && len(stale) > 0 {
		err = errors.New("the documentation differs from the binary; run: go generate ./cmd/outbox-relay")
	}
	return err
}

// writeDocs fills the generated regions of every page of dir and returns
// the pages that changed; with check it writes nothing. Every region must
// be on exactly one page.
func writeDocs(ctx context.Context, dir string, check bool) (stale []string, err error) {
	gen, err := generators(ctx)
	if err != nil {
		return nil, err
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	found := map[string]string{}
	for _, path := range pages {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		names, err := mddoc.Regions(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, name := range names {
			if other, dup := found[name]; dup {
				return nil, fmt.Errorf("region %s is on %s and on %s: keep one", name, other, path)
			}
			found[name] = path
		}
		page, err := mddoc.Fill(string(b), func(name string) (string, error) {
			g, ok := gen[name]
			if !ok {
				return "", fmt.Errorf("%s: no generator makes a region %q", path, name)
			}
			return g, nil
		})
		if err != nil {
			return nil, err
		}
		if page == string(b) {
			continue
		}
		stale = append(stale, path)
		if !check {
			if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gen)) {
		if found[name] == "" {
			return stale, fmt.Errorf("no page of %s has the region %s: add its lines\n%s\n%s", dir, name,
				mddoc.Begin(name, regenerate), mddoc.End(name))
		}
	}
	return stale, nil
}

// generators makes the text of every region, by name.
func generators(ctx context.Context) (map[string]string, error) {
	cfg, err := configurationReference(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"configuration":   cfg,
		"metrics":         metricsReference(),
		"failure-reasons": failureReasons(),
	}, nil
}

// flagSets collects the flag set a command parses: handed as its stdout
// with --help, it gets the set instead of the help text (parse).
type flagSets struct {
	io.Writer
	set *flagenv.Set
}

func (c *flagSets) collect(fs *flagenv.Set) { c.set = fs }

// commandDoc is what command name's flags are, read from the command itself
// with no variable set.
func commandDoc(ctx context.Context, name string) (flagenv.Command, error) {
	c := &flagSets{Writer: io.Discard}
	err := commands[name](ctx, []string{"--help"}, c, io.Discard, func(string) string { return "" })
	if !errors.Is(err, flag.ErrHelp) || c.set == nil {
		return flagenv.Command{}, fmt.Errorf("outbox-relay %s --help did not give its flags: %v", name, err)
	}
	return c.set.Doc(), nil
}

// seeAlso is where the documentation explains a flag of run beyond its
// help: a link the configuration reference adds to its row (the link test
// checks it resolves).
var seeAlso = map[string]string{
	"tables-config":       "[Your own table](own-table.md#your-own-table)",
	"debezium-config":     "[Coming from Debezium](own-table.md#coming-from-debezium)",
	"topics":              "[Notes](#notes-on-some-of-runs-flags)",
	"database-url":        "[Notes](#notes-on-some-of-runs-flags)",
	"kafka-partitioner":   "[Partitioning](emitting-events.md#partitioning)",
	"kafka-tls":           "[TLS](running.md#tls)",
	"console-addr":        "[The console](operating.md#the-console)",
	"cloudevents":         "[CloudEvents](cloudevents.md#cloudevents-and-trace-context)",
	"dead-letter-topic":   "[The dead-letter topic](cloudevents.md#the-dead-letter-topic)",
	"metrics-addr":        "[Metrics, health, readiness](operating.md#metrics-health-readiness)",
	"metrics-max-topics":  "[Metrics, health, readiness](operating.md#metrics-health-readiness)",
	"debug-addr":          "[Metrics, health, readiness](operating.md#metrics-health-readiness)",
	"spill-after":         "[The spill](delivery.md#long-outages-the-spill)",
	"failed-key-policy":   "[Per-key order and holds](delivery.md#per-key-order-and-holds)",
	"retry-policy":        "[Retry policy](delivery.md#retry-policy)",
	"mode":                "[The poller](delivery.md#the-poller)",
	"gap-grace":           "[The poller](delivery.md#the-poller)",
	"stuck-threshold":     "[The poller](delivery.md#the-poller)",
	"retention":           "[Retention](operating.md#retention)",
	"history-retention":   "[History](operating.md#history)",
	"slot-failover":       "[Failing over](running.md#starting-failing-over-recovering)",
	"on-invalid-slot":     "[Recovering](running.md#starting-failing-over-recovering)",
	"replication-timeout": "[The relay never stops silently](operating.md#metrics-health-readiness)",
}

// configurationReference is every documented command's flags: a section
// each, a table of flag, variable, default and meaning.
func configurationReference(ctx context.Context) (string, error) {
	var b strings.Builder
	for i, name := range documented {
		c, err := commandDoc(ctx, name)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString("\n")
		}
		synopsis := c.Name + " [flags]"
		if c.Args != "" {
			synopsis += " " + c.Args
		}
		fmt.Fprintf(&b, "## %s\n\n`%s`: %s\n", c.Name, synopsis, strings.Join(strings.Fields(c.About), " "))
		if c.Args != "" {
			fmt.Fprintf(&b, "`%s`: %s.\n", c.Args, c.ArgsHelp)
		}
		b.WriteString("\n| flag | variable | default | meaning |\n|---|---|---|---|\n")
		for _, f := range c.Flags {
			flagCell := "`--" + f.Name + "`"
			if f.Kind != "bool" {
				flagCell += " " + f.Kind
			}
			def := ""
			if f.Default != "" {
				def = "`" + mddoc.Cell(f.Default) + "`"
			}
			switch {
			case f.Required && f.RequiredUnless != "":
				def = "required unless `--" + f.RequiredUnless + "`"
			case f.Required:
				def = "required"
			}
			env := ""
			if f.Env != "" {
				env = "`" + f.Env + "`"
			}
			usage := mddoc.Cell(f.Usage)
			if link := seeAlso[f.Name]; link != "" && name == "run" {
				usage += " (" + link + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", flagCell, env, def, usage)
		}
	}
	return b.String(), nil
}

// metricsReference is the table of the relay's own metrics.
func metricsReference() string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range metrics.Catalog() {
		labels := ""
		if len(m.Labels) > 0 {
			labels = "`" + strings.Join(m.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, labels, mddoc.Cell(m.Help))
	}
	return b.String()
}

// failureReasons is the table of the values of failure_reason.
func failureReasons() string {
	var b strings.Builder
	b.WriteString("| `failure_reason` | what happened | what to do |\n|---|---|---|\n")
	for _, r := range relay.FailureReasons {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Reason, mddoc.Cell(r.When), mddoc.Cell(r.Fix))
	}
	return b.String()
}
