package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
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
