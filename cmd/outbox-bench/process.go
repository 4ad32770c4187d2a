package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
)

// relayProcess is a running outbox-relay process.
type relayProcess struct {
	cmd     *exec.Cmd
	done    chan error
	metrics string // its /metrics URL
}

func (b *bench) startRelay(args ...string) (*relayProcess, error) {
	return b.startRelayOn(b.o.dbURL, args...)
}

// startRelayOn starts a relay on the database of dbURL, which it reads from
// OUTBOX_DATABASE_URL (not the command line, where ps shows a password).
func (b *bench) startRelayOn(dbURL string, args ...string) (*relayProcess, error) {
	// The drains end when the slot is confirmed past the last commit: a
	// 100 ms status interval (default 1 s) keeps that within 100 ms of the
	// last status row being durable. One thread for Go code: every process
	// shares the machine's cores. Metrics are served on a free port: the
	// collectors run as in production.
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append(append([]string{"run", "--log-level", "warn", "--log-format", "console", "--status-interval", "100ms",
		"--max-procs", "1", "--metrics-addr", addr}, args...), b.o.relayArgs...)
	cmd := exec.Command(b.o.relayBin, args...)
	cmd.Env = append(append(os.Environ(), "OUTBOX_DATABASE_URL="+dbURL, "OUTBOX_KAFKA_BROKERS="+b.o.brokers), b.o.relayEnv...)
	cmd.Stderr = os.Stderr
	if b.relayLog != nil {
		cmd.Stderr = b.relayLog
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &relayProcess{cmd: cmd, done: make(chan error, 1), metrics: "http://" + addr + "/metrics"}
	go func() { r.done <- cmd.Wait() }()
	return r, nil
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// untilSwept waits until the relay's first gap sweep after its start has
// walked --gap-lookback (outbox_relay_gap_sweep_behind_seconds under a
// minute), and returns how long that took from since.
func (r *relayProcess) untilSwept(ctx context.Context, since time.Time) (time.Duration, error) {
	err := waitFor(ctx, 15*time.Minute, "the relay's first gap sweep", func() (bool, error) {
		gauges, err := metrics.Gauges(ctx, r.metrics)
		v, ok := gauges["outbox_relay_gap_sweep_behind_seconds"]
		return err == nil && ok && v < 60, nil // not answering yet: look again
	})
	return time.Since(since), err
}

func (r *relayProcess) pid() int { return r.cmd.Process.Pid }

// usage reads the relay's peak RSS (MiB) and CPU seconds so far.
func (r *relayProcess) usage() (float64, float64) {
	pid := r.pid()
	var rss float64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				rss = kb / 1024
			}
		}
	}
	return rss, cpuSeconds(pid)
}

// cpuSeconds is the user and system CPU a process has used so far (0 when
// it cannot be read).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks
}

// brokerCPU is the development broker's CPU seconds so far (0 without
// --broker-pid).
func (b *bench) brokerCPU() float64 {
	if b.o.brokerPID == 0 {
		return 0
	}
	return cpuSeconds(b.o.brokerPID)
}

func (r *relayProcess) stop() error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		return err
	case <-time.After(60 * time.Second):
		_ = r.cmd.Process.Kill()
		return errors.New("relay did not stop within 60s")
	}
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(_ context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// untilStreaming waits for a walsender in the streaming state.
func (b *bench) untilStreaming(ctx context.Context, who string) error {
	return waitFor(ctx, 30*time.Second, who+" to stream", func() (bool, error) {
		var n int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n)
		return n > 0, err
	})
}

func (b *bench) slotConfirmed(ctx context.Context, slot string) (pglogrepl.LSN, error) {
	var s *string
	err := b.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s)
	if err != nil || s == nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(*s)
}

// untilConfirmed waits until the relay has confirmed slot past end (every
// status row written), stops it, and returns the seconds since t0 and the
// relay's peak RSS and CPU seconds.
func (b *bench) untilConfirmed(ctx context.Context, r *relayProcess, slot string, end pglogrepl.LSN, t0 time.Time, timeout time.Duration) (secs, rss, cpu float64, err error) {
	err = waitFor(ctx, timeout, "the relay to confirm "+slot, func() (bool, error) {
		l, err := b.slotConfirmed(ctx, slot)
		return l >= end, err
	})
	secs = time.Since(t0).Seconds()
	rss, cpu = r.usage()
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	return secs, rss, cpu, err
}

func (b *bench) sent(ctx context.Context) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`).Scan(&n)
	return n, err
}

// relayRun is what a phase measured of the relay it ran.
type relayRun struct {
	secs, rssMiB, cpuS, brokerCPU float64
}

// runUntilSent starts a relay with args, waits until n events are SENT and
// stops it: timed from just before the start.
func (b *bench) runUntilSent(ctx context.Context, n int, timeout time.Duration, what string, args ...string) (relayRun, error) {
	t0, broker0 := time.Now(), b.brokerCPU()
	r, err := b.startRelay(args...)
	if err != nil {
		return relayRun{}, err
	}
	err = b.untilSent(ctx, n, timeout, what)
	run := relayRun{secs: time.Since(t0).Seconds()}
	run.rssMiB, run.cpuS = r.usage()
	run.brokerCPU = b.brokerCPU() - broker0
	if stopErr := r.stop(); err == nil {
		err = stopErr
	}
	return run, err
}

// untilSent waits until n events are SENT. Counting SENT rows is not free
// (20 ms a count on 200,000 rows, a third of a second on a million): polled
// every 20 ms, the count took half a core of the database from the phase it
// measured. So the probe asks the broker first how many records the bench
// topic holds since its last trim (two offset requests), and counts the rows
// only once Kafka holds n: the rows follow within milliseconds.
func (b *bench) untilSent(ctx context.Context, n int, timeout time.Duration, what string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.o.brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	return waitFor(ctx, timeout, what, func() (bool, error) {
		if held, err := topicRecords(ctx, adm, b.o.topic); err != nil || held < int64(n) {
			return false, err
		}
		got, err := b.sent(ctx)
		return got >= n, err
	})
}

// topicRecords is how many records topic holds: the sum over its partitions
// of end offset minus start offset.
func topicRecords(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	var held int64
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			held += o.Offset - s.Offset
		}
	})
	return held, nil
}
