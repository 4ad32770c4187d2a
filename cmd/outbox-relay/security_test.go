package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// syncBuffer is a bytes.Buffer that a running relay's logger and the test
// may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRelay runs `outbox-relay run` with args until the test ends and
// returns its stderr (JSON log lines).
func startRelay(t *testing.T, args []string, getenv func(string) string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- runMain(ctx, append([]string{"run", "--log-format", "json"}, args...), io.Discard, stderr, getenv)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the relay did not stop within 10s of its context; stderr:\n%s", stderr.String())
		}
	})
	return stderr
}

// logged waits (up to 10 s) for a log line whose msg is msg and returns it.
func logged(t *testing.T, stderr *syncBuffer, msg string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
				return line
			}
		}
	}
	t.Fatalf("no %q logged within 10s; stderr:\n%s", msg, stderr.String())
	return nil
}

func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestRun_DebugAddrServesProfilesButNotTheCommandLine(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.Cluster(t)
	// PostgreSQL is unreachable: the relay retries, its debug server serves.
	stderr := startRelay(t, []string{"--debug-addr", "127.0.0.1:0", "--metrics-addr", "",
		"--database-url", "postgres://app:db-s3cret@127.0.0.1:1/app?connect_timeout=1",
		"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "relay", "--kafka-sasl-password", "sasl-s3cret",
		"--console-addr", "", "--console-admin-token", "admin-s3cret"},
		env("OUTBOX_KAFKA_BROKERS", cluster.ListenAddrs()[0]))
	base := "http://" + logged(t, stderr, "serving Go pprof profiles")["addr"].(string)

	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("GET /debug/pprof/goroutine: %d %.200q; want the profile", code, body)
	}
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/vars", "/debug/pprof/", "/"} {
		code, body := get(t, base+path, "")
		// The flags above are runMain's, not this process's: its command
		// line is the test binary's (os.Args), which must not show either.
		for _, secret := range []string{"db-s3cret", "sasl-s3cret", "admin-s3cret", os.Args[0]} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s (%d) shows %q:\n%.500s", path, code, secret, body)
			}
		}
		if path == "/debug/pprof/cmdline" && code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	// A page whose name resolves to 127.0.0.1 (DNS rebinding) is refused.
	if code, _ := get(t, base+"/debug/pprof/goroutine?debug=1", "attacker.example:80"); code != http.StatusForbidden {
		t.Errorf("GET with Host attacker.example: %d, want 403", code)
	}
}

func TestRun_DebugAddrListensOnLoopbackUnlessAFlagSaysOtherwise(t *testing.T) {
	t.Parallel()
	getenv := env("OUTBOX_DATABASE_URL", "postgres://u@127.0.0.1:1/db", "OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092")
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.0.2.1:6060"} {
		_, stderr, code := runCLI(t, getenv, "run", "--debug-addr", addr)
		if code != flagenv.ExitUsage || !strings.Contains(stderr, "--debug-addr "+addr+" is not a loopback address") {
			t.Errorf("run --debug-addr %s: exit %d, %q; want %d refusing it", addr, code, stderr, flagenv.ExitUsage)
		}
	}
	for _, tc := range []struct {
		addr        string
		allowRemote bool
	}{{"127.0.0.1:6060", false}, {"localhost:6060", false}, {"[::1]:6060", false}, {":6060", true}, {"0.0.0.0:6060", true}} {
		if err := checkDebugAddr(tc.addr, tc.allowRemote); err != nil {
			t.Errorf("--debug-addr %s (allow remote: %v) refused: %v", tc.addr, tc.allowRemote, err)
		}
	}
	_, o, err := runFlags(nil, io.Discard, io.Discard, env("OUTBOX_DATABASE_URL", "postgres://u@h/db", "OUTBOX_KAFKA_BROKERS", "k:9092",
		"OUTBOX_DEBUG_ADDR_ALLOW_REMOTE", "true"))
	if err != nil || !o.debugAllowRemote {
		t.Fatalf("OUTBOX_DEBUG_ADDR_ALLOW_REMOTE=true not read (%v)", err)
	}
}

// hostile is what a writer may put in a topic, key, event type or (through
// the broker's answer) an error: a screen clear, a window title, a carriage
// return and a newline that fake a row, a tab that adds a column, DEL, the
// C1 CSI and a right-to-left override.
const hostile = `E'x\x1b[2J\x1b]0;pwned\x07\r\nFAKE ROW\tcol\x7f\u009b31m\u202eright'`

// terminalControls lists what in out a terminal would act on: bytes below
// 0x20 other than newline and tab, DEL, C1 controls, bidirectional
// overrides, and bytes that are not UTF-8.
func terminalControls(out string) []string {
	var found []string
	for i, r := range out {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			found = append(found, fmt.Sprintf("%U at byte %d", r, i))
		case r == utf8.RuneError:
			found = append(found, fmt.Sprintf("a byte that is not UTF-8 at %d", i))
		}
	}
	return found
}

func TestCLI_EveryCommandShowsAWritersControlCharactersEscaped(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	// A FAILED event whose topic, key, event type and last error are
	// hostile, and one queued behind it on its key.
	pgtest.Exec(t, pool, `
		WITH ev AS (
			INSERT INTO outbox.events (id, topic, key, event_type, payload) VALUES
			  ('00000000-0000-0000-0000-000000000001', `+hostile+`, `+hostile+`, `+hostile+`, '{}'),
			  ('00000000-0000-0000-0000-000000000002', `+hostile+`, `+hostile+`, `+hostile+`, '{}') RETURNING id, topic, key)
		INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, topic, key, commit_lsn, tx_position)
		SELECT id, CASE right(id::text, 1) WHEN '1' THEN 'FAILED' ELSE 'PENDING' END, 1, 'INVALID_TOPIC', `+hostile+`,
		       topic, key, '0/0'::pg_lsn + right(id::text, 1)::int, 0
		FROM ev`)
	// A relay's metrics endpoint can be hostile too.
	relayMetrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE outbox_relay_role gauge\noutbox_relay_role{role=\"standby\x1b]0;pwned\x07\"} 1\n")
	}))
	defer relayMetrics.Close()
	run := cli(context.Background(), dbURL)

	// JSON keeps the text as it is, for scripts.
	var want string
	if err := pool.QueryRow(context.Background(), `SELECT `+hostile).Scan(&want); err != nil {
		t.Fatal(err)
	}
	var f struct{ Topic string }
	if out, errOut, _ := run("failed", "--format", "json"); json.Unmarshal([]byte(out), &f) != nil || f.Topic != want {
		t.Errorf("failed --format json: %q %q; want the topic %q as it is", out, errOut, want)
	}
	calls := [][]string{
		{"failed"}, {"failed", "--format", "json"}, {"held"}, {"held", "--format", "json"},
		{"status", "--metrics-url", relayMetrics.URL}, {"status", "--format", "json", "--metrics-url", relayMetrics.URL},
		{"skip", "00000000-0000-0000-0000-000000000002"},
		{"resend", "00000000-0000-0000-0000-000000000001"}, {"skip", "--failed"}, {"purge", "--older-than", "1d"},
	}
	for _, args := range calls {
		out, errOut, code := run(args...)
		if found := terminalControls(out + errOut); len(found) > 0 {
			t.Errorf("outbox-relay %s (exit %d) printed %s raw:\n%q\n%q", strings.Join(args, " "), code, strings.Join(found, ", "), out, errOut)
		}
		if len(args) == 1 && (args[0] == "failed" || args[0] == "held") {
			if rows := strings.Count(out, "\n"); rows != 2 || !strings.Contains(out, `\x1b[2J`) {
				t.Errorf("outbox-relay %s printed %d lines, want a header and one row, with ESC as \\x1b:\n%q", args[0], rows, out)
			}
		}
	}
}

func TestRun_SecretsInURLParametersAndFilesStayOutOfTheLogsAndReadyz(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.Cluster(t)
	pwFile := filepath.Join(t.TempDir(), "sasl-password")
	if err := os.WriteFile(pwFile, []byte("sasl-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pwFile, 0o644); err != nil { // as a careless deployment leaves it
		t.Fatal(err)
	}
	// PostgreSQL is unreachable: the relay retries and /readyz says why.
	stderr := startRelay(t, []string{"--metrics-addr", "127.0.0.1:0",
		"--database-url", "postgres://app:db-s3cret@127.0.0.1:1/app?connect_timeout=1&sslpassword=key-s3cret&sslmode=disable",
		"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "relay", "--kafka-sasl-password-file", pwFile},
		env("OUTBOX_KAFKA_BROKERS", cluster.ListenAddrs()[0]))
	start := logged(t, stderr, "starting outbox-relay")
	if got := start["database_url"]; got != "postgres://app:xxxxx@127.0.0.1:1/app?connect_timeout=1&sslpassword=xxxxx&sslmode=disable" {
		t.Errorf("starting outbox-relay logs database_url %q, want its password and sslpassword hidden", got)
	}
	logged(t, stderr, "--kafka-sasl-mechanism PLAIN without TLS: the SASL password crosses the network in clear text, "+
		"for anyone on the path to read; set --kafka-tls (or use SCRAM-SHA-512)")
	if !strings.Contains(stderr.String(), "warning: --kafka-sasl-password-file: "+pwFile+" is open to group or others (mode 0644)") {
		t.Errorf("no warning of the password file's mode 0644:\n%s", stderr.String())
	}
	base := "http://" + logged(t, stderr, "serving /metrics, /healthz and /readyz")["addr"].(string)
	var readyz string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(readyz, "connect"); time.Sleep(50 * time.Millisecond) {
		_, readyz = get(t, base+"/readyz", "")
	}
	if !strings.Contains(readyz, "connect") {
		t.Errorf("/readyz never said why the relay is not ready: %s", readyz)
	}
	t.Logf("/readyz: %s", readyz)
	for _, secret := range []string{"db-s3cret", "key-s3cret", "sasl-s3cret"} {
		if strings.Contains(stderr.String()+readyz, secret) {
			t.Errorf("%q reached the logs or /readyz (%s):\n%s", secret, readyz, stderr.String())
		}
	}
}

func TestCLI_ADatabaseURLThatDoesNotParseExits64ShowingNoneOfIt(t *testing.T) {
	t.Parallel()
	for _, dbURL := range []string{
		"postgres://app:db@s3cret@127.0.0.1:1/app",                           // an @ in the password: pgx reads s3cret@127.0.0.1 as the host
		"postgres://app:db-s3cret@127.0.0.1:port/app?sslpassword=key-s3cret", // not a port
		"postgres://app:db%zzs3cret@127.0.0.1:1/app",                         // not percent-encoding
		"postgres://app:db-s3cret@127.0.0.1:1/app?pool_max_conns=s3cret",
	} {
		for _, args := range [][]string{{"run", "--kafka-brokers", "127.0.0.1:1", "--metrics-addr", ""}, {"failed"}, {"status"},
			{"migrate"}, {"console", "--listen", "127.0.0.1:0"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var out, errb bytes.Buffer
			code := runMain(ctx, args, &out, &errb, env("OUTBOX_DATABASE_URL", dbURL))
			cancel()
			printed := out.String() + errb.String()
			if code != flagenv.ExitUsage || !strings.Contains(printed, "--database-url: not a PostgreSQL URL") {
				t.Errorf("outbox-relay %s with %s: exit %d, %q; want %d saying the URL does not parse", args[0], dbURL, code, printed, flagenv.ExitUsage)
			}
			for _, part := range []string{"s3cret", "127.0.0.1:", "app:db"} {
				if strings.Contains(printed, part) {
					t.Errorf("outbox-relay %s with %s printed %q of it: %q", args[0], dbURL, part, printed)
				}
			}
		}
	}
}

func TestStatus_HidesTheSecretParametersOfTheMetricsURL(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.Migrated(t)
	run := cli(context.Background(), dbURL)
	for _, metricsURL := range []string{"http://ops:pw-s3cret@127.0.0.1:1/metrics?token=tok-s3cret", "http://127.0.0.1:port/metrics?token=tok-s3cret"} {
		for _, format := range []string{"table", "json"} {
			out, errOut, code := run("status", "--format", format, "--metrics-url", metricsURL)
			if code != 0 || !strings.Contains(out, "token=xxxxx") {
				t.Errorf("status --format %s --metrics-url %s: exit %d\n%s%s\nwant the relay shown unreachable, its token hidden", format, metricsURL, code, out, errOut)
			}
			if strings.Contains(out+errOut, "s3cret") {
				t.Errorf("status --format %s --metrics-url %s shows a secret:\n%s%s", format, metricsURL, out, errOut)
			}
		}
	}
}
