package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	url := s.start(t, settings)
	servers.Store(url, s)
	return url
}

// TLSCluster is Cluster with TLS on: the server presents certFile with
// keyFile (PEM; copied into the server's directory). Connections may still
// choose plain text; the returned URL does (sslmode=disable).
func TLSCluster(t testing.TB, certFile, keyFile string, settings ...string) string {
	t.Helper()
	s := newServer(t)
	s.run(t, "initdb", "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
	for _, f := range []struct{ from, to string }{{certFile, "server.crt"}, {keyFile, "server.key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		// In the data directory, which belongs to the server's user.
		run(t, withStdin(s.asPG("sh", "-c", fmt.Sprintf("umask 077 && cat > %s/%s", s.data, f.to)), b))
	}
	url := s.start(t, append([]string{"ssl=on"}, settings...))
	servers.Store(url, s)
	return url
}

// servers maps the URL Cluster returned to its server, for Standby.
var servers sync.Map

// Major is the major version of the server binaries the tests run (14,
// 15, ...).
func Major(t testing.TB) int {
	t.Helper()
	out, err := exec.Command(filepath.Join(serverBin(t), "postgres"), "--version").Output()
	if err != nil {
		t.Fatalf("postgres --version: %v", err)
	}
	f := strings.Fields(string(out)) // postgres (PostgreSQL) 17.10
	major, _ := strconv.Atoi(strings.Split(f[len(f)-1], ".")[0])
	return major
}

// Standby starts a physical standby of the server at primaryURL (one of
// Cluster's), streaming from it through a physical slot named after it,
// and returns its URL and a function that promotes it and returns once it
// accepts writes. settings go to the standby ("name=value"; a
// primary_conninfo replaces the one to the primary's port). It is made
// as PostgreSQL's own test harness makes one, without pg_basebackup (the
// npm builds of other majors have none): the primary is stopped cleanly,
// its data directory copied without its slots and pid file, and started
// again: connections to the primary opened before Standby are ended, so
// open pools after it. The primary's slot is returned as slot, for its
// synchronized_standby_slots.
func Standby(t testing.TB, primaryURL string, settings ...string) (url, slot string, promote func()) {
	t.Helper()
	primary := lookup(t, primaryURL)
	slot = fmt.Sprintf("standby_%d", time.Now().UnixNano())
	execSQL(t, primaryURL, `SELECT pg_create_physical_replication_slot('`+slot+`', true)`)
	primary.run(t, "pg_ctl", "-D", primary.data, "-m", "fast", "-w", "stop")
	s := newServer(t)
	run(t, s.asPG("cp", "-a", primary.data, s.data))
	run(t, s.asPG("sh", "-c", `rm -rf "$1"/pg_replslot/* "$1"/postmaster.pid && touch "$1"/standby.signal`, "sh", s.data))
	primary.restart(t)
	conninfo := fmt.Sprintf("primary_conninfo='host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=%s'", primary.port, slot)
	for _, set := range settings {
		if strings.HasPrefix(set, "primary_conninfo=") {
			conninfo = set // through a proxy, say
		}
	}
	url = s.start(t, append([]string{conninfo, "primary_slot_name=" + slot, "hot_standby=on"}, settings...))
	servers.Store(url, s)
	return url, slot, func() { s.run(t, "pg_ctl", "-D", s.data, "-w", "-t", "60", "promote") }
}

// Kill stops the server at url (one of Cluster's or Standby's) at once, as
// a crash would (pg_ctl stop -m immediate).
func Kill(t testing.TB, url string) {
	t.Helper()
	s := lookup(t, url)
	s.run(t, "pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
}

// Stop stops the server at url (one of Cluster's or Standby's) cleanly;
// Start starts it again with the same settings.
func Stop(t testing.TB, url string) {
	t.Helper()
	s := lookup(t, url)
	s.run(t, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
}

// Start starts a server Stop stopped.
func Start(t testing.TB, url string) {
	t.Helper()
	lookup(t, url).restart(t)
}

func lookup(t testing.TB, url string) *server {
	t.Helper()
	v, ok := servers.Load(url)
	if !ok {
		t.Fatalf("pgtest: %s is not a server of pgtest.Cluster or pgtest.Standby", url)
	}
	return v.(*server)
}

// server is a data directory of a test's own and how to run the server's
// programs on it.
type server struct {
	dir, data string
	asPG      func(name string, args ...string) *exec.Cmd
	port      int
	opts      string // the server options it was started with
}

func newServer(t testing.TB) *server {
	t.Helper()
	bin := serverBin(t)
	dir, err := os.MkdirTemp("", "outbox-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prog := func(name string) string {
		if strings.ContainsRune(name, '/') || (name != "initdb" && name != "pg_ctl" && name != "postgres") {
			return name // cp, sh: the system's
		}
		return filepath.Join(bin, name)
	}
	s := &server{dir: dir, data: filepath.Join(dir, "data"), asPG: func(name string, args ...string) *exec.Cmd {
		return exec.Command(prog(name), args...)
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
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", prog(name)}, args...)...)
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
	s.port = FreePort(t)
	opts := []string{"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(s.port), "-k " + s.dir, "-c wal_level=logical",
		"-c max_replication_slots=20", "-c max_wal_senders=20"}
	for _, o := range settings {
		opts = append(opts, "-c "+o)
	}
	s.opts = strings.Join(opts, " ")
	s.restart(t)
	t.Cleanup(func() { _ = s.asPG("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").Run() })
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// restart starts the server again with the options of start.
func (s *server) restart(t testing.TB) {
	t.Helper()
	s.run(t, "pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "-o", s.opts, "start")
}

func execSQL(t testing.TB, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// serverBin finds the directory of initdb, pg_ctl and postgres: on PATH
// (scripts/test.sh puts it there), else the newest /usr/lib/postgresql/*/bin.
func serverBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // the server's own directory
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

// withStdin gives cmd input on its standard input.
func withStdin(cmd *exec.Cmd, input []byte) *exec.Cmd {
	cmd.Stdin = bytes.NewReader(input)
	return cmd
}
