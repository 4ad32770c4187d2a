package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

type testBundle struct {
	dbURL   string
	slot    string // slot names are cluster-wide: one per test
	pool    *pgxpool.Pool
	cluster *kfake.Cluster
	brokers []string
}

// setup gives a test its own migrated database and a broker with the topics
// (three partitions each) and no topic auto-creation.
func setup(t *testing.T, opts ...kfake.Opt) *testBundle {
	t.Helper()
	dbURL, pool := pgtest.Migrated(t)
	c := kafkatest.Cluster(t, opts...)
	u, _ := url.Parse(dbURL)
	slot := "slot_" + strings.TrimPrefix(u.Path, "/outbox_test_")
	return &testBundle{dbURL: dbURL, slot: slot, pool: pool, cluster: c, brokers: c.ListenAddrs()}
}

func (b *testBundle) config(t *testing.T) relay.Config {
	return relay.Config{
		DatabaseURL: pgtest.RelayURL(b.dbURL), // least privilege: the relay is not superuser
		Slot:        b.slot,
		Kafka:       relay.KafkaConfig{Brokers: b.brokers, MetadataRetries: 1},
		Logger:      zaptest.NewLogger(t),
	}
}

// run runs a relay in the background; the returned stop ends it
// gracefully, releases it and returns Run's error. It is also called at
// cleanup.
func (b *testBundle) run(t *testing.T, cfg relay.Config) (stop func() error) {
	t.Helper()
	_, stop = b.runRelay(t, cfg)
	return stop
}

// runRelay is run, and also returns the relay.
func (b *testBundle) runRelay(t *testing.T, cfg relay.Config) (*relay.Relay, func() error) {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
				r.Close()
			case <-time.After(60 * time.Second):
				t.Fatal("relay did not stop within 60s of cancellation")
			}
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// startRelay runs a relay (see run) and waits until it streams.
func (b *testBundle) startRelay(t *testing.T, cfg relay.Config) (stop func() error) {
	t.Helper()
	stop = b.run(t, cfg)
	b.waitStreaming(t, cfg)
	return stop
}

// waitStreaming waits until the relay's walsender is streaming, so that what
// the test inserts next is streamed. An active slot is not enough: a slot is
// active while it is still being created, and rows committed before its
// consistent point are not streamed (the poller's gap sweep covers those).
func (b *testBundle) waitStreaming(t *testing.T, cfg relay.Config) {
	t.Helper()
	b.waitStreamingWithin(t, cfg, 30*time.Second)
}

// waitStreamingWithin is waitStreaming with a deadline of its own.
func (b *testBundle) waitStreamingWithin(t *testing.T, cfg relay.Config, within time.Duration) {
	t.Helper()
	slot := cfg.Slot
	if slot == "" {
		slot = "outbox_relay"
	}
	pgtest.Eventually(t, within, "slot "+slot+" active", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_replication_slots s
			JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = $1 AND r.state = 'streaming'`, slot)
		return n == 1, fmt.Sprintf("%d streaming walsenders for slot %s", n, slot)
	})
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (b *testBundle) waitStatus(t *testing.T, status string, n int, timeout time.Duration) {
	t.Helper()
	pgtest.Eventually(t, timeout, fmt.Sprintf("%d %s rows", n, status), func() (bool, string) {
		got := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = $1`, status)
		return got >= n, fmt.Sprintf("%d %s rows; %s; %s", got, status, b.statusCounts(t), b.slotState(t))
	})
}

// statusCounts summarises outbox.deliveries, for failure messages.
func (b *testBundle) statusCounts(t *testing.T) string {
	var s string
	err := b.pool.QueryRow(context.Background(), `
		SELECT coalesce(string_agg(format('%s/%s/%s attempts=%s: %s', status, failure_reason, left(last_error, 120), attempts, n), '; '), 'no rows')
		FROM (SELECT status, failure_reason, last_error, attempts, count(*) AS n FROM outbox.deliveries
		      GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC LIMIT 5) c`).Scan(&s)
	if err != nil {
		return "status counts: " + err.Error()
	}
	return fmt.Sprintf("deliveries: %s; events: %d", s, pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.events`))
}

// slotState describes the test's slot and its walsender, for failure messages.
func (b *testBundle) slotState(t *testing.T) string {
	var state string
	err := b.pool.QueryRow(context.Background(), `
		SELECT format('slot active=%s pid=%s restart=%s confirmed=%s current=%s walsender=%s sent=%s flush=%s',
		       s.active, s.active_pid, s.restart_lsn, s.confirmed_flush_lsn, pg_current_wal_lsn(),
		       r.state, r.sent_lsn, r.flush_lsn)
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, b.slot).Scan(&state)
	if err != nil {
		return "slot state: " + err.Error()
	}
	return state
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestRelay_DeliversCommittedEventsWithKeyPayloadHeadersAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, kfake.SeedTopics(3, "orders"))
	b.startRelay(t, b.config(t))

	// Transactions of 1, 10 and 1,000 rows; seq orders events per key.
	seq := 0
	for _, size := range []int{1, 10, 1000} {
		b.exec(t, `
			INSERT INTO outbox.events (topic, key, payload, headers, event_type)
			SELECT 'orders', 'customer-' || ((s + $1) % 7),
			       jsonb_build_object('seq', s + $1, 'note', 'größe ✓'),
			       jsonb_build_object('trace-id', 't' || (s + $1)),
			       'order.created'
			FROM generate_series(1, $2) AS s`, seq, size)
		seq += size
	}
	total := seq
	b.waitStatus(t, "SENT", total, 60*time.Second)

	recs := kafkatest.Consume(t, b.brokers, total, 30*time.Second, "orders")
	if len(recs) != total {
		t.Fatalf("read %d records from Kafka, want %d", len(recs), total)
	}
	rows := b.sentRows(t)
	lastSeq := map[string]int{}
	for _, rec := range recs {
		id, ok := header(rec, kafka.HeaderEventID)
		if !ok {
			t.Fatalf("record at %d/%d has no %s header", rec.Partition, rec.Offset, kafka.HeaderEventID)
		}
		want, ok := rows[id]
		if !ok {
			t.Fatalf("record for event %s has no SENT row", id)
		}
		checkRecord(t, id, rec, want)
		var p struct{ Seq int }
		_ = json.Unmarshal(rec.Value, &p)
		if p.Seq <= lastSeq[want.key] {
			t.Errorf("key %s: seq %d arrived after seq %d: commit order per key broken", want.key, p.Seq, lastSeq[want.key])
		}
		lastSeq[want.key] = p.Seq
	}
	if !strings.Contains(string(recs[0].Value), "größe ✓") {
		t.Errorf("non-ASCII payload mangled: %s", recs[0].Value)
	}
}

// sentRow is an event and its SENT status row.
type sentRow struct {
	key, payload, headers, eventType string
	partition                        int32
	offset                           int64
}

// sentRows reads every SENT event with its row, by event id.
func (b *testBundle) sentRows(t *testing.T) map[string]sentRow {
	t.Helper()
	rows := map[string]sentRow{}
	dbRows, err := b.pool.Query(context.Background(), `
		SELECT e.id::text, e.key, e.payload::text, e.headers::text, e.event_type, d.kafka_partition, d.kafka_offset
		FROM outbox.events e JOIN outbox.deliveries d ON d.event_id = e.id WHERE d.status = 'SENT'`)
	if err != nil {
		t.Fatal(err)
	}
	for dbRows.Next() {
		var id string
		var r sentRow
		if err := dbRows.Scan(&id, &r.key, &r.payload, &r.headers, &r.eventType, &r.partition, &r.offset); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	return rows
}

// checkRecord compares the record of event id with its row.
func checkRecord(t *testing.T, id string, rec *kgo.Record, want sentRow) {
	t.Helper()
	if string(rec.Key) != want.key {
		t.Errorf("event %s: key %q, want %q", id, rec.Key, want.key)
	}
	if string(rec.Value) != want.payload {
		t.Errorf("event %s: value %q, want payload::text %q", id, rec.Value, want.payload)
	}
	if et, _ := header(rec, kafka.HeaderEventType); et != want.eventType {
		t.Errorf("event %s: %s header %q, want %q", id, kafka.HeaderEventType, et, want.eventType)
	}
	var hs map[string]string
	_ = json.Unmarshal([]byte(want.headers), &hs)
	for k, v := range hs {
		if got, _ := header(rec, k); got != v {
			t.Errorf("event %s: header %s = %q, want %q", id, k, got, v)
		}
	}
	if rec.Partition != want.partition || rec.Offset != want.offset {
		t.Errorf("event %s: on Kafka at %d/%d, status row says %d/%d", id, rec.Partition, rec.Offset, want.partition, want.offset)
	}
}
