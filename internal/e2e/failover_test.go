package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// failoverPair is a primary and a physical standby that synchronizes the
// primary's failover slots (PostgreSQL 17 and newer), with the primary's
// logical decoding of failover slots held back until the standby confirms
// (synchronized_standby_slots), as PostgreSQL's "Logical Replication
// Failover" describes; and the development broker.
type failoverPair struct {
	primary, standby     *env
	standbySlot          string
	primaryURL, standURL string
	promote              func()
	proxy                *pgtest.Proxy // between the standby and the primary, if asked for
}

func newFailoverPair(t *testing.T, primarySettings []string, standbySettings ...string) *failoverPair {
	t.Helper()
	if major := pgtest.Major(t); major < 17 {
		t.Skipf("failover slots are PostgreSQL 17's; this is %d", major)
	}
	ctx := context.Background()
	primaryURL := pgtest.Cluster(t, nil, primarySettings...)
	pgtest.Migrate(t, primaryURL)
	f := &failoverPair{primaryURL: primaryURL}
	for i, set := range standbySettings {
		if set == "primary_conninfo=PROXY" { // the standby replicates through a proxy of the test's
			proxy, proxied := pgtest.NewProxy(t, primaryURL)
			u, _ := url.Parse(proxied)
			standbySettings[i] = fmt.Sprintf("primary_conninfo='host=127.0.0.1 port=%s user=postgres dbname=postgres'", u.Port())
			f.proxy = proxy
		}
	}
	standbyURL, standbySlot, promote := pgtest.Standby(t, primaryURL,
		append([]string{"sync_replication_slots=on", "hot_standby_feedback=on"}, standbySettings...)...)
	pool := pgtest.Pool(t, primaryURL) // Standby restarted the primary: a pool of its own
	for _, sql := range []string{`ALTER SYSTEM SET synchronized_standby_slots = '` + standbySlot + `'`, `SELECT pg_reload_conf()`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	port := pgtest.FreePort(t)
	kafkaProc := kafkaOn(t, port, "orders:3")
	brokers := fmt.Sprintf("127.0.0.1:%d", port)
	const slot = "outbox_failover"
	f.primary = &env{dbURL: primaryURL, slot: slot, pool: pool, brokers: brokers, kafka: kafkaProc, kafkaPort: port}
	f.standby = &env{dbURL: standbyURL, slot: slot, pool: pgtest.Pool(t, standbyURL), brokers: brokers, kafka: kafkaProc, kafkaPort: port}
	f.standbySlot, f.standURL, f.promote = standbySlot, standbyURL, promote
	return f
}

// write commits n events of keys k0..k9 on e, payload {"key": k, "seq": s}
// with seq counting per key from first.
func writeKeyed(t *testing.T, pool *pgxpool.Pool, first, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO outbox.events (topic, key, payload)
		SELECT 'orders', 'k' || (s % 10), jsonb_build_object('key', 'k' || (s % 10), 'seq', s)
		FROM generate_series($1::int, $2::int) s`, first, first+n-1); err != nil {
		t.Fatal(err)
	}
}

// waitReplayed waits until the standby has replayed the primary's WAL as
// it is now, and until the standby's copy of slot is synchronized.
func (f *failoverPair) waitReplayed(t *testing.T) {
	t.Helper()
	var end string
	if err := f.primary.pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 60*time.Second, "the standby replays the primary's WAL", func() (bool, string) {
		n := pgtest.Count(t, f.standby.pool, `SELECT (pg_last_wal_replay_lsn() >= $1::pg_lsn)::int`, end)
		return n == 1, "not yet"
	})
}

// inKeyOrder checks that every event is on Kafka and that each key's
// events first arrived in the order they were written.
func inKeyOrder(t *testing.T, brokers string, total int) int {
	t.Helper()
	recs := kafkatest.Consume(t, []string{brokers}, total, 60*time.Second, "orders")
	seen := map[string]bool{}
	last := map[string]int{}
	dups := 0
	for _, r := range recs {
		id := ""
		for _, h := range r.Headers {
			if h.Key == kafka.HeaderEventID {
				id = string(h.Value)
			}
		}
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		// {"key": "k3", "seq": 13}
		v := string(r.Value)
		seq, _ := strconv.Atoi(strings.TrimSuffix(v[strings.LastIndex(v, ":")+2:], "}"))
		if seq < last[string(r.Key)] {
			t.Errorf("key %s: seq %d arrived after %d", r.Key, seq, last[string(r.Key)])
		}
		last[string(r.Key)] = seq
	}
	if len(seen) != total {
		t.Fatalf("%d distinct events on Kafka, want %d", len(seen), total)
	}
	return dups
}

// A relay run with --slot-failover resumes, after the primary dies and its
// standby is promoted, from the slot the standby synchronized: no new slot,
// no backfill, nothing lost, each key in order.
func TestFailover_TheRelayResumesFromTheSyncedSlotOnThePromotedStandby(t *testing.T) {
	t.Parallel()
	f := newFailoverPair(t, nil)
	first := f.primary.relay(t, "--slot-failover")
	writeKeyed(t, f.primary.pool, 1, 500)
	f.primary.waitSent(t, 500, 60*time.Second)
	pgtest.Eventually(t, 60*time.Second, "the standby has the failover slot, synchronized", func() (bool, string) {
		n := pgtest.Count(t, f.standby.pool, `SELECT count(*) FROM pg_replication_slots
			WHERE slot_name = $1 AND synced AND NOT temporary`, f.primary.slot)
		return n == 1, "not yet"
	})
	// status against the standby shows its copy of the slot: a failover
	// slot, synced from the primary.
	out, code := runBin(t, "outbox-relay", []string{"status"}, "OUTBOX_DATABASE_URL="+f.standURL)
	if f := slotLine(out, f.primary.slot); code != 0 || len(f) < 2 || f[len(f)-2] != "yes" || f[len(f)-1] != "yes" {
		t.Errorf("status on the standby (exit %d) does not show the slot as a failover slot, synced:\n%s", code, out)
	}
	// The relay dies, then events are written that it never relays, then
	// the primary dies too.
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 10*time.Second)
	writeKeyed(t, f.primary.pool, 501, 500)
	f.waitReplayed(t)
	pgtest.Kill(t, f.primaryURL)
	f.promote()
	promoted := time.Now()

	second := f.standby.relay(t, "--slot-failover")
	f.standby.waitSent(t, 1000, 60*time.Second)
	var firstDelivery time.Time
	if err := f.standby.pool.QueryRow(context.Background(), `SELECT min(sent_at) FROM outbox.deliveries d
		JOIN outbox.events e ON e.id = d.event_id WHERE (e.payload ->> 'seq')::int > 500`).Scan(&firstDelivery); err != nil {
		t.Fatal(err)
	}
	if n := f.standby.count(t, `SELECT count(*) FROM outbox.slot_backfills`); n != 1 {
		t.Errorf("%d backfills recorded; want only the first start's (the relay must resume from the synced slot)", n)
	}
	second.mu.Lock()
	log := strings.Join(second.out, "\n")
	second.mu.Unlock()
	if strings.Contains(log, "backfilled the events committed before the new slot") {
		t.Errorf("the relay on the promoted standby created a new slot and backfilled")
	}
	dups := inKeyOrder(t, f.primary.brokers, 1000)
	report(t, "PostgreSQL %d: promoted standby to first delivery %s; 1000 events, 0 lost, %d duplicates, each key in order",
		pgtest.Major(t), firstDelivery.Sub(promoted).Round(time.Millisecond), dups)
}

// While the standby named in synchronized_standby_slots is down, PostgreSQL
// holds the failover slot's changes back. The relay says so (a log line
// naming the setting and the standby's slot, /readyz, a metric, status),
// and delivers everything by itself once the standby is back.
func TestFailover_ASlotHeldBackForAStandbyIsNeverSilent(t *testing.T) {
	t.Parallel()
	f := newFailoverPair(t, nil)
	p := f.primary.relay(t, "--slot-failover", "--replication-timeout", "8s", "--status-interval", "500ms")
	writeKeyed(t, f.primary.pool, 1, 10)
	f.primary.waitSent(t, 10, 60*time.Second)
	pgtest.Stop(t, f.standURL)
	stopped := time.Now()
	writeKeyed(t, f.primary.pool, 11, 500)
	p.waitLog(t, "postgres holds the slot's changes back until a standby confirms them: the standby of replication slot "+
		f.standbySlot+" named in synchronized_standby_slots", 8*time.Second)
	report(t, "PostgreSQL %d: the held-back slot was logged %s after the standby stopped", pgtest.Major(t),
		time.Since(stopped).Round(time.Millisecond))
	metricsURL := p.metricsURL(t)
	if body := get(t, metricsURL+"/readyz"); !strings.Contains(body, "synchronized_standby_slots") {
		t.Errorf("/readyz = %s; want the held-back slot as a reason", body)
	}
	if body := get(t, metricsURL+"/metrics"); !strings.Contains(body, "outbox_relay_slot_held_back 1") {
		t.Errorf("/metrics lacks outbox_relay_slot_held_back 1")
	}
	out, code := runBin(t, "outbox-relay", []string{"status"}, "OUTBOX_DATABASE_URL="+f.primaryURL)
	if code != 0 || !strings.Contains(out, "HELD BACK") || !strings.Contains(out, f.standbySlot) {
		t.Errorf("status (exit %d) does not say the slot is held back for %s:\n%s", code, f.standbySlot, out)
	}
	if n := f.primary.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); n != 10 {
		t.Fatalf("%d SENT while held back; PostgreSQL should have held the 500 back", n)
	}

	pgtest.Start(t, f.standURL)
	f.primary.waitSent(t, 510, 60*time.Second)
	p.waitLog(t, "postgres no longer holds the slot back for a standby", 10*time.Second)
	inKeyOrder(t, f.primary.brokers, 510)
}

// metricsURL is the base URL of the relay's /metrics, /healthz and /readyz,
// read from its log (the tests give it port 0).
func (p *proc) metricsURL(t *testing.T) string {
	t.Helper()
	p.waitLog(t, "serving /metrics", 10*time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.out {
		if strings.Contains(l, "serving /metrics") {
			if m := addrField.FindStringSubmatch(l); m != nil {
				return "http://" + m[1]
			}
		}
	}
	t.Fatal("no metrics address in the relay's log")
	return ""
}

var addrField = regexp.MustCompile(`"addr": ?"([^"]+)"`)

// get returns the body of url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a test's own loopback server
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A standby that stays connected but stops confirming (a network that
// drops its packets) holds the failover slot back as surely as a stopped
// one, and the server warns of nothing: the relay measures it from the
// standby's slot and says so within --replication-timeout.
func TestFailover_ASlotHeldBackByAStandbyThatStoppedConfirmingIsNeverSilent(t *testing.T) {
	t.Parallel()
	// The primary ends the silent standby's connection after 15 s, and the
	// standby then reconnects through the proxy and catches up.
	f := newFailoverPair(t, []string{"wal_sender_timeout=15s"}, "primary_conninfo=PROXY", "wal_receiver_timeout=15s")
	p := f.primary.relay(t, "--slot-failover", "--replication-timeout", "4s", "--status-interval", "500ms")
	writeKeyed(t, f.primary.pool, 1, 10)
	f.primary.waitSent(t, 10, 60*time.Second)
	if n := f.proxy.Freeze(); n == 0 {
		t.Fatal("no standby connection to freeze")
	}
	frozen := time.Now()
	writeKeyed(t, f.primary.pool, 11, 500)
	p.waitLog(t, "postgres holds the slot's changes back until a standby confirms them: the standby of replication slot "+
		f.standbySlot+" named in synchronized_standby_slots", 12*time.Second)
	report(t, "PostgreSQL %d: a standby that stopped confirming was said to hold the slot back %s after it stopped "+
		"(--replication-timeout 4s)", pgtest.Major(t), time.Since(frozen).Round(time.Millisecond))
	if body := get(t, p.metricsURL(t)+"/readyz"); !strings.Contains(body, "has not confirmed") {
		t.Errorf("/readyz = %s; want the lagging standby as a reason", body)
	}
	f.primary.waitSent(t, 510, 90*time.Second)
	p.waitLog(t, "postgres no longer holds the slot back for a standby", 20*time.Second)
	inKeyOrder(t, f.primary.brokers, 510)
}

// waitSent waits until n events are SENT.
func (e *env) waitSent(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	pgtest.Eventually(t, timeout, fmt.Sprintf("%d events SENT", n), func() (bool, string) {
		got := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		return got == n, fmt.Sprintf("%d SENT", got)
	})
}

// slotLine is the fields of status's line for slot.
func slotLine(status, slot string) []string {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == slot {
			return f
		}
	}
	return nil
}
