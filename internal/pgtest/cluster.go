package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Cluster starts a PostgreSQL server of the test's own, for a test that
// changes server settings the shared one must keep (wal_level,
// max_slot_wal_keep_size). initdbArgs go to initdb; settings ("name=value")
// to the server, after wal_level=logical. It returns the URL of its
// postgres database and stops the server at cleanup. As root it runs the
// server as the postgres user, which initdb requires.
func Cluster(t testing.TB, initdbArgs []string, settings ...string) string {
	t.Helper()
	s := newServer(t)
	s.run(t, "initdb", append([]string{"-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"}, initdbArgs...)...)
	return s.start(t, settings)
}

// Standby starts a physical standby of the server at primaryURL (one of
// Cluster's), streaming from it, and returns its URL and a function that
// promotes it and returns once it accepts writes. PostgreSQL 15 copies no
// logical slot to a standby: a relay started on the promoted server
// creates its slot anew.
func Standby(t testing.TB, primaryURL string) (url string, promote func()) {
	t.Helper()
	s := newServer(t)
	s.run(t, "pg_basebackup", "-D", s.data, "-R", "-X", "stream", "-c", "fast", "-d", primaryURL)
	url = s.start(t, nil)
	return url, func() { s.run(t, "pg_ctl", "-D", s.data, "-w", "-t", "60", "promote") }
}

// server is a data directory of a test's own and how to run the server's
// programs on it.
type server struct {
	dir, data string
	asPG      func(name string, args ...string) *exec.Cmd
}

func newServer(t testing.TB) *server {
	t.Helper()
	bin := serverBin(t)
	dir, err := os.MkdirTemp("", "outbox-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &server{dir: dir, data: filepath.Join(dir, "data"), asPG: func(name string, args ...string) *exec.Cmd {
		return exec.Command(filepath.Join(bin, name), args...)
	}}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.asPG = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	}
	return s
}

func (s *server) run(t testing.TB, name string, args ...string) {
	t.Helper()
	run(t, s.asPG(name, args...))
}

// start starts the server on a free loopback port, stops it at cleanup and
// returns the URL of its postgres database.
func (s *server) start(t testing.TB, settings []string) string {
	t.Helper()
	port := FreePort(t)
	opts := []string{"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(port), "-k " + s.dir, "-c wal_level=logical",
		"-c max_replication_slots=20", "-c max_wal_senders=20"}
	for _, o := range settings {
		opts = append(opts, "-c "+o)
	}
	s.run(t, "pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "-o", strings.Join(opts, " "), "start")
	t.Cleanup(func() { _ = s.asPG("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").Run() })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// serverBin finds the directory of initdb, pg_ctl and pg_basebackup: on PATH (scripts/test.sh
// puts it there), else the newest /usr/lib/postgresql/*/bin.
func serverBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // the server's own directory, which has pg_basebackup too
		}
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	t.Fatal("PostgreSQL server binaries (initdb, pg_ctl) not found: run scripts/test.sh, which installs them")
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func run(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
