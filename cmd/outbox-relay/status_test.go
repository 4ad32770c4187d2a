package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// prober is a relay's probes, fixed.
type prober struct{}

func (prober) Healthy() error { return nil }
func (prober) Ready() error   { return nil }

// seedForOperators builds three SENT events on orders (two 10 days old)
// and one FAILED on payments (10 days old), and returns a runner of the CLI.
func seedForOperators(t *testing.T) (*pgxpool.Pool, func(args ...string) (string, string, int)) {
	t.Helper()
	dbURL, pool := pgtest.Migrated(t)
	pgtest.Exec(t, pool, `WITH ev AS (
		INSERT INTO outbox.events (topic, payload, created_at)
		SELECT t, '{}', now() - d * interval '1 day'
		FROM (VALUES ('orders', 10), ('orders', 10), ('orders', 0), ('payments', 10)) AS v(t, d) RETURNING id, topic, created_at)
		INSERT INTO outbox.deliveries (event_id, status, failure_reason)
		SELECT id, CASE WHEN topic = 'payments' THEN 'FAILED' ELSE 'SENT' END,
		       CASE WHEN topic = 'payments' THEN 'INVALID_TOPIC' END FROM ev`)
	return pool, func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := runMain(context.Background(), args, &out, &errb, env("OUTBOX_DATABASE_URL", dbURL))
		return out.String(), errb.String(), code
	}
}

func TestStatus_ShowsSlotsCountsFailuresAndTheRunningRelay(t *testing.T) {
	t.Parallel()
	_, run := seedForOperators(t)
	m := metrics.New("test")
	m.SetRole(metrics.RoleStandby)
	relayMetrics := httptest.NewServer(m.Handler(prober{}))
	defer relayMetrics.Close()

	out, errOut, code := run("status", "--format", "json", "--metrics-url", relayMetrics.URL+"/metrics")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var rep struct {
		Topics []struct {
			Table, Topic, Status string
			Events               int
		}
		Failed []struct {
			Reason string
			Events int
		} `json:"failed_by_reason"`
		Relay struct {
			Role    string
			Breaker string `json:"kafka_breaker"`
		} `json:"relay"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	if len(rep.Topics) != 2 || rep.Topics[0].Topic != "orders" || rep.Topics[0].Events != 3 || rep.Topics[1].Status != "FAILED" ||
		rep.Topics[0].Table != "outbox.events" {
		t.Errorf("counts by topic and status: %+v", rep.Topics)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].Reason != "INVALID_TOPIC" || rep.Failed[0].Events != 1 {
		t.Errorf("FAILED by reason: %+v", rep.Failed)
	}
	if rep.Relay.Role != "standby" || rep.Relay.Breaker != "closed" {
		t.Errorf("relay from its metrics: %+v, want standby with the breaker closed", rep.Relay)
	}
	if out, _, _ := run("status", "--metrics-url", relayMetrics.URL+"/metrics"); !strings.Contains(out, "role standby, kafka circuit breaker closed") ||
		!strings.Contains(out, "INVALID_TOPIC") {
		t.Errorf("status for a person:\n%s", out)
	}
}

func TestPurge_DeletesOldEventsOfAStatusInBatches(t *testing.T) {
	t.Parallel()
	pool, run := seedForOperators(t)

	if out, errOut, code := run("purge", "--older-than", "168h"); code != 0 || !strings.Contains(out, "purged 2 SENT events") {
		t.Fatalf("purge: exit %d %q %q", code, out, errOut)
	}
	if out, _, code := run("purge", "--older-than", "168h", "--status", "failed", "--topic", "payments"); code != 0 ||
		!strings.Contains(out, "purged 1 FAILED events") {
		t.Fatalf("purge FAILED of payments: exit %d %q", code, out)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events`); n != 1 {
		t.Fatalf("%d events left, want the recent SENT one", n)
	}
	for _, bad := range [][]string{{"purge"}, {"purge", "--older-than", "1h", "--status", "PENDING"}} {
		if _, errOut, code := run(bad...); code == 0 || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d %q, want a refusal naming the flag", bad, code, errOut)
		}
	}
}
