package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/relay"
	"github.com/outbox-relay/outbox-relay/retry"
)

// attemptRow is one row of outbox.delivery_attempts.
type attemptRow struct {
	attempt  int
	failedAt time.Time
	reason   string
	err      string
}

func (b *testBundle) attempts(t *testing.T, id string) []attemptRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT attempt, failed_at, coalesce(failure_reason, ''), error
		FROM outbox.delivery_attempts WHERE event_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (a attemptRow, err error) {
		return a, r.Scan(&a.attempt, &a.failedAt, &a.reason, &a.err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAttempts_EachFailedAttemptIsKeptAsItFailsTheLast10OfAnEvent(t *testing.T) {
	t.Parallel()
	const maxAttempts = 13
	b := setup(t, kfake.SeedTopics(1, "orders", "flaky"))
	// Every produce to "flaky" is refused with an error the relay retries:
	// the stream's attempt, then the poller's.
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "flaky", Err: kerr.UnknownServerError, Count: -1})
	cfg := b.config(t)
	cfg.Retry = retry.Policy{Kind: retry.KindFixed, Delay: 20 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: maxAttempts, Jitter: retry.JitterNone}
	cfg.Poll.Interval = 20 * time.Millisecond
	b.startRelay(t, cfg)

	id := b.insertAround(t, "flaky", `{"n": "flaky"}`)
	// Kept as they fail: the first is there while the event is retried.
	pgtest.Eventually(t, 30*time.Second, "the first failed attempt recorded", func() (bool, string) {
		got := b.attempts(t, id)
		return len(got) > 0 && got[0].attempt == 1, fmt.Sprintf("%+v", got)
	})
	r := b.waitFor(t, id, "FAILED")
	if r.attempts != maxAttempts {
		t.Fatalf("got %+v, want FAILED after %d attempts", r, maxAttempts)
	}
	got := b.attempts(t, id)
	if len(got) != store.AttemptsKept {
		t.Fatalf("%d attempts kept, want the last %d: %+v", len(got), store.AttemptsKept, got)
	}
	for i, a := range got {
		want := maxAttempts - store.AttemptsKept + 1 + i
		wantReason := ""
		if want == maxAttempts {
			wantReason = relay.ReasonRetriesExhausted
		}
		if a.attempt != want || a.reason != wantReason || a.err == "" {
			t.Errorf("kept attempt %d: %+v, want attempt %d, reason %q and the broker's error", i, a, want, wantReason)
		}
		if i > 0 && a.failedAt.Before(got[i-1].failedAt) {
			t.Errorf("attempt %d failed at %s, before the one before it (%s)", a.attempt, a.failedAt, got[i-1].failedAt)
		}
	}
	if last := got[len(got)-1]; last.err != r.lastError {
		t.Errorf("the last attempt's error %q, want the status row's last_error %q", last.err, r.lastError)
	}

	// They go with their event, deleted as retention does, with the
	// relay's rights.
	if _, err := pgtest.Pool(t, pgtest.RelayURL(b.dbURL)).Exec(context.Background(), `DELETE FROM outbox.events WHERE id = $1`, id); err != nil {
		t.Fatalf("deleting the event as the relay: %v", err)
	}
	if n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.delivery_attempts WHERE event_id = $1`, id); n != 0 {
		t.Errorf("%d attempts outlived their event", n)
	}
}
