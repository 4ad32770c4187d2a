package metrics_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/promtest"
)

const (
	dashboardPath  = "../../docs/grafana/outbox-relay-dashboard.json"
	rulesPath      = "../../docs/prometheus/outbox-relay-rules.yml"
	rulesTestPath  = "../../docs/prometheus/outbox-relay-rules.test.yml"
	metricsDocPath = "../../docs/operating.md"
)

// family is what an operator sees of a metric: its type and labels.
type family struct {
	typ    string
	labels []string
}

// relayFamilies are the outbox_relay_* families of a relay that has seen
// every kind of label.
func relayFamilies(t *testing.T) map[string]family {
	t.Helper()
	m := metrics.New("test")
	m.CountDeadLetters()
	tally := m.NewTally()
	tally.Add("orders", metrics.Sent, "", false)
	tally.AddTable("public.orders", metrics.Sent)
	tally.Flush()
	m.Statement.WithLabelValues("barrier")
	m.SetSlotLag("outbox_relay", 0)
	gathered, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, f := range gathered {
		if !strings.HasPrefix(f.GetName(), "outbox_relay_") {
			continue
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		sort.Strings(labels)
		out[f.GetName()] = family{typ: strings.ToLower(dto.MetricType_name[int32(f.GetType())]), labels: labels}
	}
	return out
}

var (
	rangeSelector  = regexp.MustCompile(`\[[^\]]*\]`)
	metricSelector = regexp.MustCompile(`\b(outbox_relay_[a-z_]+|up)\b(\{[^}]*\})?`)
)

func TestDashboard_EveryQueryUsesTheRateIntervalAndTheDatasourceJobAndInstanceVariables(t *testing.T) {
	d := promtest.ReadDashboard(t, dashboardPath)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"datasource", "job", "instance"} {
		if !slices.Contains(vars, want) {
			t.Errorf("no $%s variable (variables: %v): the dashboard works only with one Grafana, or sums deployments together", want, vars)
		}
	}
	for _, p := range d.Panels {
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource uid %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		for _, q := range p.Targets {
			for _, r := range rangeSelector.FindAllString(q.Expr, -1) {
				if r != "[$__rate_interval]" {
					t.Errorf("panel %q %s: range %s, want [$__rate_interval] (a fixed window has no series at a long scrape interval): %s",
						p.Title, q.RefID, r, q.Expr)
				}
			}
			for _, s := range metricSelector.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(s[2], `job=~"$job"`) || !strings.Contains(s[2], `instance=~"$instance"`) {
					t.Errorf("panel %q %s: %s does not select $job and $instance: %s", p.Title, q.RefID, s[0], q.Expr)
				}
			}
		}
	}
}

func TestDashboard_StatsShowZeroNotNoDataAndColourWhatIsBad(t *testing.T) {
	for _, p := range promtest.ReadDashboard(t, dashboardPath).Panels {
		if p.Type != "stat" {
			continue
		}
		if th := p.FieldConfig.Defaults.Thresholds; th == nil || len(th.Steps) == 0 {
			t.Errorf("stat %q has no thresholds", p.Title)
		}
		if p.Title == "Version" { // names the versions running: nothing to count
			continue
		}
		for _, q := range p.Targets {
			if !strings.HasSuffix(q.Expr, " or vector(0)") {
				t.Errorf("stat %q shows \"No data\" rather than 0 when nothing matches: %s", p.Title, q.Expr)
			}
		}
	}
}

// What the metrics reference tells operators to watch is on the dashboard: every
// metric but the confirmed LSN (a number only status needs).
func TestDashboard_ShowsEveryRelayMetricAndScrapeHealth(t *testing.T) {
	used := map[string]bool{}
	for _, p := range promtest.ReadDashboard(t, dashboardPath).Panels {
		for _, q := range p.Targets {
			for _, s := range metricSelector.FindAllStringSubmatch(q.Expr, -1) {
				used[strings.TrimSuffix(s[1], "_bucket")] = true
			}
		}
	}
	families := relayFamilies(t)
	for name := range families {
		if !used[name] && name != "outbox_relay_slot_confirmed_lsn" {
			t.Errorf("%s is on no panel", name)
		}
	}
	for name := range used {
		if _, ok := families[name]; !ok && name != "up" {
			t.Errorf("a panel queries %s, which the relay does not export", name)
		}
	}
	if !used["up"] {
		t.Errorf("no panel shows scrape health (up)")
	}
}

func TestAlertingRules_PassPromtoolAndCoverWhatOperatorsWatch(t *testing.T) {
	out, err := exec.Command(promtest.Binary(t, "promtool"), "check", "rules", rulesPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesPath, err, out)
	}
	// Their unit tests: how long each condition must hold, standbys not
	// alerted on as not ready, one alert per slot.
	out, err = exec.Command(promtest.Binary(t, "promtool"), "test", "rules", rulesTestPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestPath, err, out)
	}
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, alert := range []string{"OutboxRelayDown", "OutboxRelayNotReady", "OutboxRelayStreamSilent", "OutboxRelaySlotLagGrowing",
		"OutboxRelayKafkaBreakerOpen", "OutboxRelayEventsFailed", "OutboxRelaySpilling", "OutboxRelayDeadLettersRefused",
		"OutboxRelaySlotHeldBack"} {
		if !strings.Contains(string(rules), "alert: "+alert+"\n") {
			t.Errorf("no alert %s in %s", alert, rulesPath)
		}
	}
}

// docRow is a row of the metrics reference in docs/operating.md (generated
// from metrics.Catalog by go generate ./cmd/outbox-relay): `name`, type,
// `label`, `label`, meaning.
var docRow = regexp.MustCompile("^\\| `(outbox_relay_[^`]*)` \\| (\\w+) \\| ([^|]*) \\| (.*) \\|$")

func TestDocs_MetricTableMatchesTheMetricsOnNamesLabelsAndTypes(t *testing.T) {
	b, err := os.ReadFile(metricsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	families := relayFamilies(t)
	documented := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		documented[name] = true
		f, ok := families[name]
		if !ok {
			t.Errorf("docs/operating.md documents %s, which the relay does not export", name)
			continue
		}
		var ls []string
		for _, l := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[3], -1) {
			ls = append(ls, l[1])
		}
		sort.Strings(ls)
		if !slices.Equal(ls, f.labels) || m[2] != f.typ {
			t.Errorf("docs/operating.md: %s %s with labels %v; /metrics: %s with labels %v", name, m[2], ls, f.typ, f.labels)
		}
		if name == "outbox_relay_status_statement_duration_seconds" {
			for _, s := range []string{"insert_outcomes", "record_outcomes", "barrier", "direct_outcomes"} {
				if !regexp.MustCompile(`\b` + s + `\b`).MatchString(m[4]) {
					t.Errorf("docs/operating.md's statement labels lack %s", s)
				}
			}
		}
	}
	for name := range families {
		if !documented[name] {
			t.Errorf("%s is not in the metrics reference of docs/operating.md", name)
		}
	}
}
