package relay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
	"github.com/outbox-relay/outbox-relay/retry"
)

// pending makes n PENDING rows due now, as an operator's resend would.
func (b *testBundle) pending(t *testing.T, topic string, n int) {
	t.Helper()
	b.exec(t, `WITH ev AS (
			INSERT INTO outbox.events (topic, key, payload)
			SELECT $1, 'k' || (s % 10), jsonb_build_object('s', s) FROM generate_series(1, $2) AS s RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, next_attempt_at) SELECT id, 'PENDING', now() FROM ev`, topic, n)
}

func TestPoller_TwoRelaysNeverClaimTheSameRowAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	const n = 3000

	// Record every claim: a trigger notes which instance took which row.
	b.exec(t, `CREATE TABLE claims (event_id uuid, instance text, at timestamptz DEFAULT clock_timestamp());
		GRANT INSERT ON claims TO outbox_relay`) // the trigger runs as the relay
	b.exec(t, `CREATE FUNCTION note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.status = 'PROCESSING' AND OLD.status <> 'PROCESSING' THEN
				INSERT INTO public.claims (event_id, instance) VALUES (NEW.event_id, NEW.locked_by); -- the relay runs it with search_path pg_catalog, pg_temp
			END IF;
			RETURN NEW;
		END $$`)
	b.exec(t, `CREATE TRIGGER note_claim BEFORE UPDATE ON outbox.deliveries FOR EACH ROW EXECUTE FUNCTION note_claim()`)

	var relays []*relay.Relay
	for _, name := range []string{"relay-a", "relay-b"} {
		cfg := b.config(t)
		cfg.Mode = relay.ModePoll
		cfg.Poll.InstanceID = name
		cfg.Poll.BatchSize = 100
		cfg.Poll.Interval = 10 * time.Millisecond
		relays = append(relays, b.startPoller(t, cfg))
	}
	// Both poll before there is anything to claim: one alone could take
	// every row before the other starts.
	pgtest.Eventually(t, 30*time.Second, "both pollers polling", func() (bool, string) {
		for _, r := range relays {
			if err := r.Ready(); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	b.pending(t, "orders", n)
	b.waitStatus(t, "SENT", n, 60*time.Second)
	if twice := pgtest.Count(t, b.pool, `SELECT count(*) FROM (SELECT event_id FROM claims GROUP BY 1 HAVING count(*) > 1) x`); twice != 0 {
		t.Fatalf("%d events were claimed more than once", twice)
	}
	if per := pgtest.Count(t, b.pool, `SELECT count(DISTINCT instance) FROM claims`); per != 2 {
		t.Errorf("claims came from %d instances, want both", per)
	}
	recs := kafkatest.Consume(t, b.brokers, n, 30*time.Second, "orders")
	if len(recs) != n {
		t.Fatalf("%d records on Kafka, want exactly %d", len(recs), n)
	}
}

func TestPoller_RowLeftProcessingByADeadInstanceIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	// Build the rows a dead relay leaves behind: claimed long ago.
	b.exec(t, `WITH ev AS (INSERT INTO outbox.events (id, topic, payload) VALUES
			('00000000-0000-0000-0000-00000000000a', 'orders', '{"n": 1}'),
			('00000000-0000-0000-0000-00000000000b', 'orders', '{"n": 2}') RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts, max_attempts, locked_by, locked_at)
		SELECT id, 'PROCESSING', CASE WHEN id = '00000000-0000-0000-0000-00000000000b' THEN 2 ELSE 0 END, 3,
		       'dead-relay', now() - interval '10 minutes' FROM ev`)
	// A fresh claim by a live instance is left alone.
	b.exec(t, `WITH ev AS (INSERT INTO outbox.events (id, topic, payload) VALUES
			('00000000-0000-0000-0000-00000000000c', 'orders', '{"n": 3}') RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, locked_by, locked_at) SELECT id, 'PROCESSING', 'live-relay', now() FROM ev`)
	cfg := b.config(t)
	cfg.Mode = relay.ModePoll
	b.startPoller(t, cfg)

	r := b.waitFor(t, "00000000-0000-0000-0000-00000000000a", "SENT")
	if r.attempts != 2 {
		t.Errorf("recovered row: attempts %d, want 2 (the lost attempt counts, then the delivery)", r.attempts)
	}
	r = b.waitFor(t, "00000000-0000-0000-0000-00000000000b", "FAILED")
	if r.reason != relay.ReasonRetriesExhausted || r.attempts != 3 {
		t.Errorf("row on its last attempt: %+v, want FAILED RETRIES_EXHAUSTED after 3", r)
	}
	if r := b.delivery(t, "00000000-0000-0000-0000-00000000000c"); r.status != "PROCESSING" {
		t.Errorf("a live instance's fresh claim was taken: %+v", r)
	}
	// The attempt taken back is a failed attempt of its event, with why.
	for id, want := range map[string]string{"00000000-0000-0000-0000-00000000000a": "", "00000000-0000-0000-0000-00000000000b": relay.ReasonRetriesExhausted} {
		got := b.attempts(t, id)
		if len(got) != 1 || got[0].reason != want || !strings.Contains(got[0].err, "dead-relay") {
			t.Errorf("attempts of %s: %+v, want the one taken back from dead-relay (reason %q)", id, got, want)
		}
	}
}

func TestPoller_RepeatedlyFailingEventEndsFailedAfterExactlyMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders", "flaky"))
	// Every produce to "flaky" is rejected with an error that is neither
	// message-specific nor an outage: the poller retries it.
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "flaky", Err: kerr.UnknownServerError, Count: -1})
	cfg := b.config(t)
	cfg.Retry = retry.Policy{Kind: retry.KindFixed, Delay: 50 * time.Millisecond, MaxDelay: time.Second, MaxAttempts: 4, Jitter: retry.JitterNone}
	cfg.Poll.Interval = 20 * time.Millisecond
	b.startRelay(t, cfg)

	id := b.insertAround(t, "flaky", `{"n": "flaky"}`)
	r := b.waitFor(t, id, "FAILED")
	if r.reason != relay.ReasonRetriesExhausted || r.attempts != 4 {
		t.Fatalf("got %+v, want FAILED RETRIES_EXHAUSTED after exactly 4 attempts", r)
	}
	if r.lastError == "" {
		t.Fatal("last_error is empty; want the broker's words")
	}
	if recs := kafkatest.Consume(t, b.brokers, 2, 15*time.Second, "orders"); len(recs) != 2 {
		t.Fatalf("%d events around the failing one delivered, want 2", len(recs))
	}
}

func TestPoller_GapSweepDeliversEventsWrittenWhileTheSlotWasGone(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	cfg := b.config(t)
	cfg.Poll.GapGrace = time.Second
	stop := b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k', jsonb_build_object('s', s) FROM generate_series(1, 100) s`)
	b.waitStatus(t, "SENT", 100, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The slot is lost; events keep coming; a new slot starts after them.
	b.exec(t, `SELECT pg_drop_replication_slot($1)`, b.slot)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			b.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k', jsonb_build_object('gap', s) FROM generate_series(1, 10) s`)
		}
	}()
	wg.Wait()
	b.startRelay(t, cfg)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) SELECT 'orders', 'k', jsonb_build_object('after', s) FROM generate_series(1, 50) s`)
	b.waitStatus(t, "SENT", 350, 60*time.Second)
	if missing := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.events e
		WHERE NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id AND d.status = 'SENT')`); missing != 0 {
		t.Fatalf("%d events never delivered", missing)
	}
	recs := kafkatest.Consume(t, b.brokers, 350, 30*time.Second, "orders")
	if len(recs) < 350 {
		t.Fatalf("%d records on Kafka, want 350", len(recs))
	}
}

// startPoller runs a poll-only relay (no slot to wait for).
func (b *testBundle) startPoller(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	r, stop := b.runRelay(t, cfg)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("poller stopped with %v", err)
		}
	})
	return r
}

func TestPoller_SweepNeverPassesATransactionThatHasNotWrittenYet(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	cfg := b.config(t)
	cfg.Mode = relay.ModePoll // the sweep is the delivery path, grace 0
	cfg.Poll.Interval = 10 * time.Millisecond
	b.startPoller(t, cfg)
	ctx := context.Background()

	// A transaction starts (created_at of its events will be its start) but
	// writes nothing yet...
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	// ...while later events are committed and swept around it.
	b.exec(t, `INSERT INTO outbox.events (id, topic, payload) VALUES ('00000000-0000-0000-0000-0000000000a1', 'orders', '{"n": "later"}')`)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries`) == 0 {
		time.Sleep(20 * time.Millisecond) // a bounded look: the sweep may hold back, and that is fine
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox.events (id, topic, payload) VALUES ('00000000-0000-0000-0000-0000000000a0', 'orders', '{"n": "early"}')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "00000000-0000-0000-0000-0000000000a1", "SENT")
	b.waitFor(t, "00000000-0000-0000-0000-0000000000a0", "SENT")
}

func TestPoller_RecheckDeliversEventsCommittedBehindTheSweep(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	cfg := b.config(t)
	cfg.Mode = relay.ModePoll
	cfg.Poll.Interval = 10 * time.Millisecond
	cfg.Poll.GapRecheck = 2 * time.Second
	b.startPoller(t, cfg)

	// The sweep walks past a moment only once no open transaction can still
	// commit events stamped with it. An event whose created_at is older than
	// its commit by more than that allows for (here, set by the application)
	// lands behind the first pass; the recheck pass, trailing 2 s behind,
	// delivers it.
	b.exec(t, `INSERT INTO outbox.events (id, topic, payload) VALUES ('00000000-0000-0000-0000-0000000000b1', 'orders', '{"n": "on time"}')`)
	b.waitFor(t, "00000000-0000-0000-0000-0000000000b1", "SENT")
	b.exec(t, `INSERT INTO outbox.events (id, topic, payload, created_at)
		VALUES ('00000000-0000-0000-0000-0000000000b0', 'orders', '{"n": "late"}', now() - interval '1 second')`)
	b.waitFor(t, "00000000-0000-0000-0000-0000000000b0", "SENT")
}

func TestPoller_InPollModeTwoRelaysSweepingDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	for i := range 2 {
		cfg := b.config(t)
		cfg.Mode = relay.ModePoll
		cfg.Poll.Interval = 5 * time.Millisecond
		cfg.Poll.BatchSize = 50 // many rounds, each relay trying the sweep
		cfg.Poll.InstanceID = fmt.Sprintf("poller-%d", i)
		b.startPoller(t, cfg)
	}
	for range 30 {
		b.insertTagged(t, "swept", 100)
	}
	b.expectEveryEventOnceOnKafka(t, time.Minute)
}

func TestPoller_InPollModeTheSweepQueuesAKeyBehindItsQueuedRows(t *testing.T) {
	eachIDMode(t, func(t *testing.T, id string) {
		b := setup(t, kfake.SeedTopics(3, "orders"))
		// The sweep must not send k's next events before its first.
		b.queueKeyHead(t, id)
		cfg := b.config(t)
		cfg.Mode = relay.ModePoll
		cfg.Poll.Interval = 10 * time.Millisecond
		b.startPoller(t, cfg)
		b.writeKey(t, id, 2, 50, 10)
		b.checkInOrder(t, 51)
	})
}

// Before its poller's first sweep a relay's outbox_relay_gap_sweep_behind_seconds
// is its whole --gap-lookback, not 0: 0 reads as caught up, and a scrape (or
// a wait for the first sweep) can come before the poller starts.
func TestPoller_GapSweepBehindIsTheLookbackUntilTheFirstSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(t)
	cfg.Metrics = metrics.New("test")
	cfg.Poll.GapLookback = 3 * time.Hour
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := testutil.ToFloat64(cfg.Metrics.GapSweepBehind); got != 3*3600 {
		t.Fatalf("gap_sweep_behind_seconds before Run: %v, want 10800 (the lookback)", got)
	}
}
