package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// cli runs the command line against dbURL and returns its stdout, stderr
// and exit code.
// cli runs commands as an operator does: as a member of outbox_operator,
// no more.
func cli(ctx context.Context, dbURL string) func(args ...string) (string, string, int) {
	return cliAs(ctx, pgtest.OperatorURL(dbURL))
}

// cliAs runs commands with dbURL as given (migrate: the schema's owner).
func cliAs(ctx context.Context, dbURL string) func(args ...string) (string, string, int) {
	return func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := runMain(ctx, args, &out, &errb, env("OUTBOX_DATABASE_URL", dbURL))
		return out.String(), errb.String(), code
	}
}

func TestFailedAndResend_MirrorTheSQLOperations(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	ctx := context.Background()
	// Five failed events on two topics, failing a second apart, and one SENT.
	if _, err := pool.Exec(ctx, `
		WITH ev AS (
			INSERT INTO outbox.events (id, topic, payload, event_type) VALUES
			  ('00000000-0000-0000-0000-000000000001', 'orders',   '{}', 'a'),
			  ('00000000-0000-0000-0000-000000000002', 'orders',   '{}', 'a'),
			  ('00000000-0000-0000-0000-000000000003', 'orders',   '{}', 'b'),
			  ('00000000-0000-0000-0000-000000000004', 'payments', '{}', 'a'),
			  ('00000000-0000-0000-0000-000000000005', 'payments', '{}', 'a'),
			  ('00000000-0000-0000-0000-000000000006', 'orders',   '{}', 'a') RETURNING id, topic)
		INSERT INTO outbox.deliveries (event_id, topic, status, attempts, failure_reason, last_error, updated_at)
		SELECT id, topic, CASE WHEN id::text LIKE '%6' THEN 'SENT' ELSE 'FAILED' END, 1,
		       CASE WHEN id::text LIKE '%6' THEN NULL ELSE 'INVALID_TOPIC' END, 'broker said no',
		       now() - (6 - right(id::text, 1)::int) * interval '1 second'
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	run := cli(ctx, dbURL)

	if out, _, code := run("failed", "--count"); code != 0 || strings.TrimSpace(out) != "5" {
		t.Fatalf("failed --count = %q (exit %d), want 5", out, code)
	}
	if out, _, _ := run("failed", "--count", "--topic", "orders", "--event-type", "a"); strings.TrimSpace(out) != "2" {
		t.Fatalf("failed --count --topic orders --event-type a = %q, want 2", out)
	}
	out, errOut, _ := run("failed", "--limit", "2")
	if !strings.Contains(out, "-000000000001") || !strings.Contains(out, "-000000000002") || strings.Contains(out, "-000000000003") {
		t.Fatalf("first page:\n%s", out)
	}
	next, hinted := strings.CutPrefix(strings.TrimSpace(errOut), "more may follow: --after ")
	if !hinted || !strings.HasSuffix(next, ",00000000-0000-0000-0000-000000000002") {
		t.Fatalf("first page does not say how to get the next: %q", errOut)
	}
	// The page's last event is no longer FAILED: the next page still
	// starts after its place.
	if _, err := pool.Exec(ctx, `UPDATE outbox.deliveries SET status = 'SKIPPED', updated_at = now()
		WHERE event_id = '00000000-0000-0000-0000-000000000002'`); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run("failed", "--limit", "2", "--after", next, "--format", "json")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, `"event_id":"00000000-0000-0000-0000-000000000003"`) {
		t.Fatalf("second page, after its cursor's event was skipped:\n%s", out)
	}
	if _, err := pool.Exec(ctx, `UPDATE outbox.deliveries SET status = 'FAILED', updated_at = now() - interval '4 seconds'
		WHERE event_id = '00000000-0000-0000-0000-000000000002'`); err != nil {
		t.Fatal(err)
	}
	// An event id alone is the place of its status row.
	out, _, _ = run("failed", "--limit", "2", "--after", "00000000-0000-0000-0000-000000000002", "--format", "json")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, `"event_id":"00000000-0000-0000-0000-000000000003"`) {
		t.Fatalf("second page after an event id:\n%s", out)
	}

	if out, _, code := run("resend", "00000000-0000-0000-0000-000000000001"); code != 0 || !strings.Contains(out, "resent 1 events") {
		t.Fatalf("resend by id: %q (exit %d)", out, code)
	}
	if out, _, code := run("resend", "--failed", "--topic", "payments"); code != 0 || !strings.Contains(out, "resent 2 failed events") {
		t.Fatalf("resend --failed --topic payments: %q (exit %d)", out, code)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING' AND attempts = 0
		AND failure_reason IS NULL AND last_error IS NULL AND next_attempt_at <= now()`); n != 3 {
		t.Fatalf("%d rows PENDING with attempts reset and failure cleared, want 3", n)
	}
	if _, errOut, code := run("resend", "00000000-0000-0000-0000-0000000000ff"); code == 0 || !strings.Contains(errOut, "no such event") {
		t.Fatalf("resend of a missing event: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run("resend"); code == 0 || !strings.Contains(errOut, "event ids") {
		t.Fatalf("resend without ids: exit %d, %q", code, errOut)
	}
	// The SENT event can be replayed with SQL.
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT outbox.resend('00000000-0000-0000-0000-000000000006')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("outbox.resend of a SENT event: %v %v", ok, err)
	}
}

func TestHeldAndSkip_MirrorTheSQLOperations(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	ctx := context.Background()
	// Key k held by a FAILED event with two queued behind it; one SENT event.
	if _, err := pool.Exec(ctx, `
		WITH ev AS (
			INSERT INTO outbox.events (id, topic, key, payload) VALUES
			  ('00000000-0000-0000-0000-000000000001', 'orders', 'k', '{}'),
			  ('00000000-0000-0000-0000-000000000002', 'orders', 'k', '{}'),
			  ('00000000-0000-0000-0000-000000000003', 'orders', 'k', '{}'),
			  ('00000000-0000-0000-0000-000000000004', 'orders', 'j', '{}') RETURNING id, topic, key)
		INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, topic, key, commit_lsn, tx_position)
		SELECT id, CASE right(id::text, 1) WHEN '1' THEN 'FAILED' WHEN '4' THEN 'SENT' ELSE 'PENDING' END,
		       CASE right(id::text, 1) WHEN '1' THEN 1 ELSE 0 END,
		       CASE right(id::text, 1) WHEN '1' THEN 'MESSAGE_TOO_LARGE' END,
		       CASE right(id::text, 1) WHEN '1' THEN 'broker said no' END,
		       topic, key, '0/0'::pg_lsn + right(id::text, 1)::int, 0
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	run := cli(ctx, dbURL)

	out, errOut, code := run("held")
	if code != 0 || !strings.Contains(out, "-000000000001") || !strings.Contains(out, "MESSAGE_TOO_LARGE") ||
		strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "1 held keys") {
		t.Fatalf("held (exit %d):\n%s%s\nwant one key, blocked by event 1, and the count", code, out, errOut)
	}
	if out, _, _ := run("held", "--format", "json"); !strings.Contains(out, `"queued":2`) {
		t.Fatalf("held --format json = %q, want 2 queued", out)
	}
	if _, errOut, code := run("skip", "00000000-0000-0000-0000-000000000004"); code != 1 || !strings.Contains(errOut, "is SENT") {
		t.Fatalf("skip of a SENT event: exit %d, %q; want a refusal that names its status", code, errOut)
	}
	if _, errOut, code := run("skip", "not-a-uuid"); code != flagenv.ExitUsage || !strings.Contains(errOut, "not an event id") {
		t.Fatalf("skip not-a-uuid: exit %d, %q; want a usage error (%d)", code, errOut, flagenv.ExitUsage)
	}
	if out, _, code := run("skip", "00000000-0000-0000-0000-000000000001"); code != 0 || !strings.Contains(out, "skipped 1 events") {
		t.Fatalf("skip: %q (exit %d)", out, code)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SKIPPED'`); n != 1 {
		t.Fatalf("%d SKIPPED rows, want 1", n)
	}
	if out, errOut, _ := run("held"); strings.Count(out, "\n") != 1 || !strings.Contains(errOut, "no held keys") {
		t.Fatalf("held after the skip:\n%s%s\nwant none", out, errOut)
	}
}

func TestHeld_PagesTheKeysInTopicAndKeyOrderWithTheirTotal(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	ctx := context.Background()
	// Five keys of orders, each held by a FAILED event with one queued
	// behind it; key k'3 has a quote, for the next page's flags.
	if _, err := pool.Exec(ctx, `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload)
		            SELECT 'orders', CASE WHEN k = 3 THEN 'k''3' ELSE 'k' || k END, jsonb_build_object('n', n)
		            FROM generate_series(1, 5) k, generate_series(1, 2) n RETURNING id, key, (payload->>'n')::int AS n)
		INSERT INTO outbox.deliveries (event_id, status, attempts, failure_reason, last_error, topic, key, commit_lsn, tx_position)
		SELECT id, CASE n WHEN 1 THEN 'FAILED' ELSE 'PENDING' END, 1, CASE n WHEN 1 THEN 'MESSAGE_TOO_LARGE' END, 'no',
		       'orders', key, '0/0'::pg_lsn + n, 0
		FROM ev`); err != nil {
		t.Fatal(err)
	}
	run := cli(ctx, dbURL)
	var keys []string
	args := []string{"held", "--limit", "2", "--format", "json"}
	for page := 0; page < 4; page++ {
		out, errOut, code := run(args...)
		if code != 0 || !strings.Contains(errOut, "5 held keys") {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" {
				var h struct{ Key string }
				if err := json.Unmarshal([]byte(line), &h); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, h.Key)
			}
		}
		_, next, found := strings.Cut(errOut, "more may follow: ")
		if !found {
			break
		}
		// The flags as a shell reads them: 'k'\''3' is k'3.
		fields := strings.Fields(strings.TrimSpace(next))
		unquote := func(s string) string { return strings.ReplaceAll(strings.Trim(s, "'"), `'\''`, "'") }
		args = []string{"held", "--limit", "2", "--format", "json", fields[0], unquote(fields[1]), fields[2], unquote(fields[3])}
	}
	want := []string{}
	rows, err := pool.Query(ctx, `SELECT DISTINCT key FROM outbox.deliveries ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		want = append(want, k)
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") || len(keys) != 5 {
		t.Errorf("held page by page: %q, want %q", keys, want)
	}
}
