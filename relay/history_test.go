package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// minutesMatch reports whether outbox.delivery_minutes holds, per topic
// label, what outbox.deliveries holds: every SENT event of orders
// delivered, every FAILED one failed (under its topic, or "(refused)" when
// it was never sent to a topic of its own), and nothing else; and the same
// in every minute's total ("(all)") and in outbox.delivery_hours.
func (b *testBundle) minutesMatch(t *testing.T) (bool, string) {
	t.Helper()
	sent := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
	failed := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'`)
	delivered := pgtest.Count(t, b.pool, `SELECT coalesce(sum(delivered), 0) FROM outbox.delivery_minutes WHERE topic = 'orders'`)
	counted := pgtest.Count(t, b.pool, `SELECT coalesce(sum(failed), 0) FROM outbox.delivery_minutes WHERE topic IN ('missing', '(refused)')`)
	others := pgtest.Count(t, b.pool, `SELECT coalesce(sum(delivered + failed), 0) - $1 - $2 FROM outbox.delivery_minutes
		WHERE topic <> '(all)'`, delivered, counted)
	all := pgtest.Count(t, b.pool, `SELECT coalesce(sum(delivered), 0) * 1000 + coalesce(sum(failed), 0) FROM outbox.delivery_minutes
		WHERE topic = '(all)'`)
	hours := pgtest.Count(t, b.pool, `SELECT coalesce(sum(delivered), 0) * 1000 + coalesce(sum(failed), 0) FROM outbox.delivery_hours`)
	got := fmt.Sprintf("delivery_minutes: %d delivered, %d failed, %d elsewhere, (all) %d; delivery_hours %d; deliveries: %d SENT, %d FAILED",
		delivered, counted, others, all, hours, sent, failed)
	return sent == 30 && failed == 4 && delivered == sent && counted == failed && others == 0 && all == 30004 && hours == all, got
}

// The relay counts what it recorded SENT and FAILED per minute and topic
// and adds it to outbox.delivery_minutes as it goes (every few seconds,
// while it runs: not at its stop), on the stream's path and the poller's.
func TestHistory_TheRelayWritesPerMinuteCountsOfWhatItDeliveredAndFailed(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{relay.ModeStream, relay.ModePoll} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kfake.SeedTopics(1, "orders"))
			cfg := b.config(t)
			cfg.Mode = mode
			cfg.Poll.Interval = 20 * time.Millisecond
			if mode == relay.ModeStream {
				b.startRelay(t, cfg)
			} else {
				b.run(t, cfg)
			}
			b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
				SELECT CASE WHEN i % 10 = 0 THEN 'missing' ELSE 'orders' END, 'k' || i, '{}'
				FROM generate_series(1, 33) i`) // 30 to orders, 3 to a missing topic
			b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('bad topic!', 'k', '{}')`)
			pgtest.Eventually(t, 30*time.Second, "delivery_minutes matching the status rows while the relay runs",
				func() (bool, string) { return b.minutesMatch(t) })
			rows := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.delivery_minutes
				WHERE minute <> date_trunc('minute', minute) OR minute > now() OR minute < now() - interval '5 minutes'`)
			if rows != 0 {
				t.Errorf("%d rows of delivery_minutes are not of a whole minute of the last five", rows)
			}
		})
	}
}

// Rows of minutes older than --history-retention are deleted by the
// relay; the recent ones stay.
func TestHistory_TheRelayDeletesMinutesPastTheHistoryRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	b.exec(t, `INSERT INTO outbox.delivery_minutes (minute, topic, delivered, failed) VALUES
		(date_trunc('minute', now() - interval '3 hours'), 'orders', 5, 1),
		(date_trunc('minute', now() - interval '61 minutes'), 'orders', 7, 0),
		(date_trunc('minute', now() - interval '30 minutes'), 'orders', 11, 2)`)
	cfg := b.config(t)
	cfg.HistoryRetention = time.Hour
	b.run(t, cfg)
	pgtest.Eventually(t, 30*time.Second, "the minutes older than an hour deleted", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.delivery_minutes`)
		return n == 1, fmt.Sprintf("%d rows", n)
	})
	if n := pgtest.Count(t, b.pool, `SELECT delivered FROM outbox.delivery_minutes`); n != 11 {
		t.Fatalf("the row kept has %d delivered, want the recent minute's 11", n)
	}
}

// A graceful stop writes what the relay counted since its last flush.
func TestHistory_AGracefulStopWritesWhatWasCountedSinceTheLastFlush(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(1, "orders"))
	stop := b.startRelay(t, b.config(t))
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload)
		SELECT CASE WHEN i % 10 = 0 THEN 'missing' ELSE 'orders' END, 'k' || i, '{}' FROM generate_series(1, 33) i`)
	b.exec(t, `INSERT INTO outbox.events (topic, key, payload) VALUES ('bad topic!', 'k', '{}')`)
	b.waitStatus(t, "SENT", 30, 30*time.Second)
	b.waitStatus(t, "FAILED", 4, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ok, got := b.minutesMatch(t); !ok {
		t.Fatalf("right after a graceful stop: %s", got)
	}
}
