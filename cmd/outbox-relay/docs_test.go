package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/relay"
)

// The configuration reference, the metrics and the failure reasons in
// docs/ are what this binary says: regenerated and compared.
func TestDocs_TheGeneratedPagesAreWhatTheBinarySays(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "docs")
	stale, err := writeDocs(context.Background(), dir, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range stale {
		t.Errorf("%s is not what the binary says of its flags, metrics or failure reasons; regenerate it: "+
			"go generate ./cmd/outbox-relay (then review the diff)", page)
	}
}

// Every flag of every command is in the configuration reference, with its
// variable: a command left out of the list would leave its flags
// undocumented.
func TestDocs_TheConfigurationReferenceListsEveryCommandsFlags(t *testing.T) {
	t.Parallel()
	for name := range commands {
		if !strings.Contains(strings.Join(documented, " "), name) {
			t.Errorf("command %s is not in the configuration reference (documented, docs.go)", name)
		}
	}
	ref, err := configurationReference(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range documented {
		c, err := commandDoc(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Flags) == 0 {
			t.Errorf("outbox-relay %s: no flags read", name)
		}
		for _, f := range c.Flags {
			if !strings.Contains(ref, "| `--"+f.Name+"`") || (f.Env != "" && !strings.Contains(ref, "`"+f.Env+"`")) {
				t.Errorf("outbox-relay %s --%s (%s) is not in the reference", name, f.Name, f.Env)
			}
		}
	}
	run, err := commandDoc(context.Background(), "run")
	if err != nil {
		t.Fatal(err)
	}
	for flag := range seeAlso {
		if !slices.ContainsFunc(run.Flags, func(f flagenv.Flag) bool { return f.Name == flag }) {
			t.Errorf("seeAlso links --%s, which run does not have", flag)
		}
	}
	// A flag's variable, as run reads it.
	if !strings.Contains(ref, "| `--kafka-brokers` list | `OUTBOX_KAFKA_BROKERS` | required |") {
		t.Errorf("run's --kafka-brokers is not listed as required with OUTBOX_KAFKA_BROKERS:\n%s", ref)
	}
	if !strings.Contains(ref, "| `--topic` string | `OUTBOX_PURGE_TOPIC` |") {
		t.Error("purge's --topic is not listed with OUTBOX_PURGE_TOPIC")
	}
}

// The metrics reference lists what the registry serves: a metric
// registered around the catalog would be missing from it.
func TestDocs_TheMetricsCatalogHasEveryMetricTheRelayServes(t *testing.T) {
	t.Parallel()
	m := metrics.New("test")
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, d := range metrics.Catalog() {
		listed[d.Name] = true
	}
	for _, f := range families {
		if name := f.GetName(); strings.HasPrefix(name, "outbox_relay_") && !listed[name] {
			t.Errorf("%s is served but not in metrics.Catalog", name)
		}
	}
	if len(listed) < 20 {
		t.Errorf("the catalog lists %d metrics, want the relay's 20 and more", len(listed))
	}
}

// Every failure_reason the code can write (a Reason... constant of the
// packages that decide outcomes) is in relay.FailureReasons, so the
// troubleshooting page lists it with what to do.
func TestDocs_EveryFailureReasonInTheCodeIsDocumented(t *testing.T) {
	t.Parallel()
	documented := map[string]bool{}
	for _, r := range relay.FailureReasons {
		if documented[r.Reason] {
			t.Errorf("%s is listed twice", r.Reason)
		}
		documented[r.Reason] = true
		if r.When == "" || r.Fix == "" {
			t.Errorf("%s: say what happened and what to do", r.Reason)
		}
	}
	found := 0
	for _, dir := range []string{"internal/kafka", "internal/store", "relay"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join("..", "..", dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			ast.Inspect(pkg, func(n ast.Node) bool {
				spec, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range spec.Names {
					if !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
						continue
					}
					lit, ok := spec.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue // an alias of another package's constant
					}
					v, _ := strconv.Unquote(lit.Value)
					found++
					if !documented[v] {
						t.Errorf("%s.%s = %q is not in relay.FailureReasons: say when it is written and what to do", dir, name.Name, v)
					}
				}
				return true
			})
		}
	}
	if found < 7 {
		t.Errorf("found %d Reason constants in the code; the test no longer reads them", found)
	}
}
