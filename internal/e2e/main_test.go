// Package e2e runs the built outbox-relay and kafka-dev binaries as separate
// processes against a real PostgreSQL, to test what only a process can show:
// SIGKILL, SIGTERM, exit codes and resident memory.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outbox-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, pkg := range []string{"outbox-relay", "kafka-dev"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "../../cmd/"+pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// report records a figure in the test log and, when OUTBOX_TEST_REPORT names
// a file, there too, so scripts/test.sh can print it after the run.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	if path := os.Getenv("OUTBOX_TEST_REPORT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// proc is a running binary whose output goes to the test log.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	mu   sync.Mutex
	out  []string
}

func start(t *testing.T, name string, args []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	// Relays of parallel tests must not share the default metrics port.
	cmd.Env = append(append(os.Environ(), "OUTBOX_METRICS_ADDR=127.0.0.1:0"), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanned
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			n := len(p.out)
			from := max(0, n-40)
			t.Logf("last %d lines of %s:\n%s", n-from, name, strings.Join(p.out[from:], "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// waitLog waits until the process has written a line containing substr.
func (p *proc) waitLog(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	pgtest.Eventually(t, timeout, fmt.Sprintf("log line %q", substr), func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.out {
			if strings.Contains(l, substr) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d lines so far", len(p.out))
	})
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s", timeout)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("waiting for process: %v", p.err)
	return -1
}

// peakRSS is the process's high-water resident set size in bytes.
func (p *proc) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("reading /proc status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %s: %v", sig, err)
	}
}

// env is one test's database and development broker.
type env struct {
	dbURL   string
	slot    string
	pool    *pgxpool.Pool
	brokers string
	kafka   *proc
	// kafkaPort is kafka's, for a test that starts it again.
	kafkaPort int
}

func newEnv(t *testing.T, topics string, kafkaFlags ...string) *env {
	t.Helper()
	dbURL, pool := pgtest.Migrated(t)
	port := pgtest.FreePort(t)
	kafka := kafkaOn(t, port, topics, kafkaFlags...)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var db string
	_ = pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db)
	return &env{dbURL: dbURL, slot: "slot_" + strings.TrimPrefix(db, "outbox_test_"), pool: pool, brokers: addr, kafka: kafka, kafkaPort: port}
}

// kafkaOn starts kafka-dev on port with topics (and more serve flags), and
// waits until it listens.
func kafkaOn(t *testing.T, port int, topics string, more ...string) *proc {
	t.Helper()
	k := start(t, "kafka-dev", append([]string{"serve", "--port", strconv.Itoa(port), "--topics", topics}, more...))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pgtest.Eventually(t, 10*time.Second, "kafka-dev listening", func() (bool, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return k
}

// startRelay starts outbox-relay run on the test's slot.
func (e *env) startRelay(t *testing.T, extra ...string) *proc {
	t.Helper()
	return start(t, "outbox-relay", append([]string{"run", "--log-format", "console"}, extra...),
		"OUTBOX_DATABASE_URL="+pgtest.RelayURL(e.dbURL), "OUTBOX_KAFKA_BROKERS="+e.brokers, "OUTBOX_SLOT="+e.slot,
		"OUTBOX_KAFKA_METADATA_RETRIES=1")
}

// slotPID is the pid of the walsender holding the test's slot, or 0.
func (e *env) slotPID(t *testing.T) int {
	t.Helper()
	var pid int
	_ = e.pool.QueryRow(context.Background(), `SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots
		WHERE slot_name = $1`, e.slot).Scan(&pid)
	return pid
}

// relayStartWait bounds a relay's start, its slot's creation included.
const relayStartWait = 2 * time.Minute

// relay starts outbox-relay run and waits until its walsender streams.
//
// A relay's first start creates its slot, and PostgreSQL creates a logical
// slot only once every transaction running in the cluster when it began
// has ended. The suite's packages share one cluster and run at once, so
// another package's long transaction can hold that up: 22.6 and 27.3 s in
// two runs of scripts/test.sh on 2026-11-28 (the relay's log: "starting
// outbox-relay" to "the slot is consistent"), past a 30 s wait. Hence
// relayStartWait.
func (e *env) relay(t *testing.T, extra ...string) *proc {
	t.Helper()
	oldPID := e.slotPID(t)
	p := e.startRelay(t, extra...)
	pgtest.Eventually(t, relayStartWait, "relay streaming", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("relay exited early: %v", p.err)
		default:
		}
		n := pgtest.Count(t, e.pool, `SELECT count(*) FROM pg_replication_slots s
			JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = $1 AND r.state = 'streaming' AND r.pid <> $2`, e.slot, oldPID)
		return n == 1, fmt.Sprintf("%d new streaming walsenders", n)
	})
	return p
}

func (e *env) count(t *testing.T, sql string) int {
	t.Helper()
	return pgtest.Count(t, e.pool, sql)
}
