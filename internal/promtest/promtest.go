// Package promtest runs Debian's Prometheus against a test's scrape targets
// on loopback and evaluates queries through its HTTP API, so tests check the
// dashboard's panels and the alerting rules (docs/) the way operators see
// them. It also reads the dashboard's queries.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Binary is the path of Debian's prometheus or promtool: $OUTBOX_PROMETHEUS
// or $OUTBOX_PROMTOOL when set (scripts/test.sh sets them when it unpacks
// the package), else /usr/bin/<name>. The test fails without it.
func Binary(t testing.TB, name string) string {
	t.Helper()
	bin := os.Getenv("OUTBOX_" + strings.ToUpper(name))
	if bin == "" {
		bin = "/usr/bin/" + name
	}
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("this test needs Debian's %s at %s (scripts/test.sh unpacks the prometheus package and sets OUTBOX_%s): %v",
			name, bin, strings.ToUpper(name), err)
	}
	return bin
}

// Server is a Prometheus the test started; it is stopped (by its PID) at
// cleanup.
type Server struct {
	URL string
}

// Start starts Prometheus on a free loopback port, scraping targets
// (host:port) as job every scrape interval and evaluating ruleFiles as
// often, with its storage in a temporary directory, and waits until it is
// ready.
func Start(t testing.TB, job string, scrape time.Duration, targets []string, ruleFiles ...string) *Server {
	t.Helper()
	bin := Binary(t, "prometheus")
	dir := t.TempDir()
	quoted := func(s []string) string {
		q := make([]string, len(s))
		for i, v := range s {
			q[i] = strconv.Quote(v)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	abs := make([]string, len(ruleFiles))
	for i, f := range ruleFiles {
		a, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		abs[i] = a
	}
	config := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nrule_files: %s\n"+
		"scrape_configs:\n  - job_name: %s\n    static_configs:\n      - targets: %s\n",
		scrape, scrape, quoted(abs), strconv.Quote(job), quoted(targets))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // this process only, by its PID
		<-exited
		_ = log.Close()
	})
	s := &Server{URL: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, out)
		default:
		}
		if resp, err := http.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus on %s not ready after 30s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a loopback address nobody listens on.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Sample is one series of an instant query's result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

func (s Sample) String() string { return fmt.Sprintf("%v %v", s.Labels, s.Value) }

// Query evaluates expr now (/api/v1/query). A query Prometheus refuses is
// an error.
func (s *Server) Query(expr string) ([]Sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := s.get("/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want an instant vector", expr, data.ResultType)
	}
	out := make([]Sample, len(data.Result))
	for i, r := range data.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", expr, r.Value[1], err)
		}
		out[i] = Sample{Labels: r.Metric, Value: v}
	}
	return out, nil
}

// Rule is an alerting rule Prometheus loaded, with how its last evaluation
// went.
type Rule struct {
	Name, Query, Health, LastError string
}

// Rules are the alerting rules Prometheus loaded (/api/v1/rules).
func (s *Server) Rules() ([]Rule, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Type, Name, Query, Health string
				LastError                 string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get("/api/v1/rules?type=alert", &data); err != nil {
		return nil, err
	}
	var out []Rule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out = append(out, Rule{Name: r.Name, Query: r.Query, Health: r.Health, LastError: r.LastError})
		}
	}
	return out, nil
}

func (s *Server) get(path string, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %s", resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}
