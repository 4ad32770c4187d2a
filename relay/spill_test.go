package relay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// steadyWriter commits two events per transaction, 200 transactions a
// second, over 200 keys, with a global seq in the payload, until stop is
// closed. It returns how many events it committed once it has stopped.
func steadyWriter(t *testing.T, b *testBundle, stop <-chan struct{}) (count *atomic.Int64, done <-chan struct{}) {
	count = &atomic.Int64{}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for seq := 1; ; seq += 2 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := b.pool.Exec(context.Background(), `INSERT INTO outbox.events (topic, key, payload) VALUES
				('orders', 'k' || ($1::int % 200), jsonb_build_object('seq', $1::int)),
				('orders', 'k' || (($1::int + 1) % 200), jsonb_build_object('seq', $1::int + 1))`, seq); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			count.Add(2)
		}
	}()
	return count, finished
}

// slotWAL is how far the slot is behind the server's WAL: unconfirmed
// (confirmed_flush_lsn) and retained (restart_lsn, what PostgreSQL keeps).
func (b *testBundle) slotWAL(t *testing.T) (unconfirmed, retained int64) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
		pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`,
		b.slot).Scan(&unconfirmed, &retained)
	if err != nil {
		t.Fatalf("reading slot position: %v", err)
	}
	return unconfirmed, retained
}

// confirmedPastNow waits up to timeout for the slot to be confirmed past
// the server's WAL position of now, and says how long that took.
func (b *testBundle) confirmedPastNow(t *testing.T, timeout time.Duration) (took time.Duration, ok bool) {
	t.Helper()
	ctx := context.Background()
	var mark string
	if err := b.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&mark); err != nil {
		t.Fatalf("reading the WAL position: %v", err)
	}
	start := time.Now()
	for time.Since(start) < timeout {
		var past bool
		if err := b.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
			b.slot, mark).Scan(&past); err != nil {
			t.Fatalf("reading the slot position: %v", err)
		}
		if past {
			return time.Since(start), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return timeout, false
}

func TestSpill_ALongKafkaOutageMovesToTheTableAndTheSlotKeepsUp(t *testing.T) {
	t.Parallel()
	const outage = 20 * time.Second
	for _, spill := range []bool{true, false} {
		t.Run(fmt.Sprintf("spill=%v", spill), func(t *testing.T) {
			t.Parallel()
			b, restart := setupRestartable(t)
			cfg := b.config(t)
			cfg.SpillAfter = -1
			if spill {
				cfg.SpillAfter = 3 * time.Second
			}
			cfg.Poll.Interval = 50 * time.Millisecond
			b.startRelay(t, cfg)
			stop := make(chan struct{})
			count, written := steadyWriter(t, b, stop)
			time.Sleep(2 * time.Second) // steady traffic before the outage: nothing to wait on but the clock

			b.cluster.Close()
			down := time.Now()
			var startLag, startRetained int64
			for i := 0; time.Since(down) < outage; i++ { // sample the slot through the outage
				time.Sleep(time.Second)
				lag, retained := b.slotWAL(t)
				if i == 0 || spill && time.Since(down) < cfg.SpillAfter+2*time.Second {
					startLag, startRetained = lag, retained
				}
			}
			endLag, endRetained := b.slotWAL(t)
			queued := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING'`)
			t.Logf("FIGURES spill=%v: %s outage under a writer of 400 events/s over 200 keys: unconfirmed WAL %d kB "+
				"(%d kB %s), retained by the slot %d kB (%d kB then); %d events queued PENDING",
				spill, outage, endLag>>10, startLag>>10, map[bool]string{true: "2s after the spill began", false: "1s into the outage"}[spill],
				endRetained>>10, startRetained>>10, queued)
			if spill {
				// The WAL position is the server's, and the tests that run
				// beside this one write WAL in bursts of megabytes: a byte
				// count of unconfirmed WAL sampled at one instant is noise.
				// A slot that keeps up is confirmed past the position of
				// the end of the outage soon after, with Kafka still down.
				if took, ok := b.confirmedPastNow(t, 10*time.Second); ok {
					t.Logf("FIGURES spill=true: the slot was confirmed past the end of the outage %.1f s later, Kafka still down", took.Seconds())
				} else {
					t.Errorf("the slot was not confirmed past the end of the outage within %s while spilling, want it to keep up", took)
				}
				if queued == 0 {
					t.Errorf("no events queued while spilling")
				}
			} else if queued != 0 {
				t.Errorf("%d events queued without spilling", queued)
			}

			restart()
			up := time.Now()
			pgtest.Eventually(t, 60*time.Second, "the queue drained", func() (bool, string) {
				n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status <> 'SENT'`)
				return n == 0, fmt.Sprintf("%d rows not SENT", n)
			})
			drained := time.Since(up)
			time.Sleep(2 * time.Second) // the writer goes on after the drain: the stream publishes directly again
			close(stop)
			<-written
			n := int(count.Load())
			checkDelivered(t, b, n)
			t.Logf("FIGURES spill=%v: queue of %d drained %.1f s after Kafka came back; all %d events on Kafka once, in commit order per key",
				spill, queued, drained.Seconds(), n)
		})
	}
}

func TestSpill_ARelayStartedWhileKafkaIsUnreachableStreamsSpillsAndDeliversOnceItIsUp(t *testing.T) {
	t.Parallel()
	b, restart := setupRestartable(t)
	b.cluster.Close() // Kafka was never reachable for this relay
	cfg := b.config(t)
	cfg.SpillAfter = 2 * time.Second
	cfg.Poll.Interval = 50 * time.Millisecond
	b.startRelay(t, cfg) // streams: it does not wait for Kafka

	const n = 600
	<-writeEvents(t, b, n, nil)
	// Every event gets a PENDING row and the slot is confirmed past them,
	// though Kafka has not been reachable once: the server can recycle WAL.
	pgtest.Eventually(t, 30*time.Second, "every event queued and the slot confirmed past them", func() (bool, string) {
		queued := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'PENDING' AND attempts = 0`)
		behind := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_replication_slots
			WHERE slot_name = $1 AND confirmed_flush_lsn < (SELECT max(commit_lsn) FROM outbox.deliveries)`, b.slot)
		return queued == n && behind == 0, fmt.Sprintf("%d of %d queued, slot behind the last queued commit: %v", queued, n, behind == 1)
	})
	unconfirmed, _ := b.slotWAL(t)
	t.Logf("FIGURES kafka unreachable from the start: %d events queued, unconfirmed WAL %d kB", n, unconfirmed>>10)

	restart()
	checkDelivered(t, b, n)
}
