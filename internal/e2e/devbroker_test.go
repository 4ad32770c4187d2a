package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// runBin runs a built binary to completion and returns its output and
// exit code.
func runBin(t *testing.T, name string, args []string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out), code
}

func TestDevBroker_HelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"consume", "--help"}, {"topics", "create", "--help"}} {
		if out, code := runBin(t, "kafka-dev", args); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("kafka-dev %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if out, code := runBin(t, "kafka-dev", []string{"serve", "--prot", "1"}); code != 64 || !strings.Contains(out, "did you mean --port?") {
		t.Errorf("kafka-dev serve --prot: exit %d, want 64 with a suggestion\n%s", code, out)
	}
}

// The tour of README.md: an event for a topic that does not exist is
// FAILED INVALID_TOPIC; create the topic on the running development
// broker, resend the event, and it is delivered.
func TestDevBroker_CreateTheTopicThenResendDelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders")
	e.relay(t)
	var id string
	if err := e.pool.QueryRow(context.Background(), `INSERT INTO outbox.events (topic, key, payload)
		VALUES ('invoices', 'k', '{"n": 1}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		var s string
		_ = e.pool.QueryRow(context.Background(), `SELECT status || coalesce(' ' || failure_reason, '')
			FROM outbox.deliveries WHERE event_id = $1`, id).Scan(&s)
		return s
	}
	pgtest.Eventually(t, 30*time.Second, "the event FAILED INVALID_TOPIC", func() (bool, string) {
		return status() == "FAILED INVALID_TOPIC", status()
	})
	if out, code := runBin(t, "kafka-dev", []string{"topics", "create", "--brokers", e.brokers, "--topic", "invoices", "--partitions", "1"}); code != 0 {
		t.Fatalf("kafka-dev topics create: exit %d\n%s", code, out)
	}
	if out, code := runBin(t, "outbox-relay", []string{"resend", id}, "OUTBOX_DATABASE_URL="+e.dbURL); code != 0 {
		t.Fatalf("outbox-relay resend: exit %d\n%s", code, out)
	}
	pgtest.Eventually(t, 30*time.Second, "the event SENT", func() (bool, string) { return status() == "SENT", status() })
	out, code := runBin(t, "kafka-dev", []string{"consume", "--brokers", e.brokers, "--topic", "invoices", "--count", "1"})
	if code != 0 || !strings.Contains(out, `"value":"{\"n\": 1}"`) {
		t.Fatalf("kafka-dev consume: exit %d\n%s", code, out)
	}
}
