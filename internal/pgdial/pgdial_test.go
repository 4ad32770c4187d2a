package pgdial_test

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func segmentSize(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mss int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		mss, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return mss
}

// On loopback (MSS 65,483) both ends of a connection the relay opens use
// segments of at most MaxSegment: a window just under 64 KB, which Linux
// offers after small messages, must never be too small for one segment.
func TestDialer_CapsTheSegmentSizeOfBothEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := pgdial.Dialer(0)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	if got := segmentSize(t, c); got > pgdial.MaxSegment {
		t.Errorf("the relay's end sends segments of %d bytes, want at most %d", got, pgdial.MaxSegment)
	}
	if got := segmentSize(t, peer); got > pgdial.MaxSegment {
		t.Errorf("the server's end sends segments of %d bytes, want at most %d", got, pgdial.MaxSegment)
	}
}

// Every way pgdial opens a connection sets search_path to pg_catalog,
// pg_temp, over what the URL's options and the database's settings say.
func TestSearchPath_EveryConnectionHasPgCatalogThenPgTemp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDB(t)
	admin := pgtest.Pool(t, dbURL)
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+db+` SET search_path = public`); err != nil {
		t.Fatal(err)
	}
	withOptions := dbURL + "&options=-c%20search_path%3Dpublic"
	conn, err := pgdial.Connect(ctx, withOptions, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pc, err := pgdial.PoolConfig(withOptions, 0)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cc, err := pgconn.ParseConfig(withOptions)
	if err != nil {
		t.Fatal(err)
	}
	pgdial.Apply(cc, 0)
	raw, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	rawPath, err := raw.Exec(ctx, `SHOW search_path`).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]func() (string, error){
		"Connect":    func() (s string, err error) { return s, conn.QueryRow(ctx, `SHOW search_path`).Scan(&s) },
		"PoolConfig": func() (s string, err error) { return s, pool.QueryRow(ctx, `SHOW search_path`).Scan(&s) },
		"Apply":      func() (string, error) { return string(rawPath[0].Rows[0][0]), nil },
	} {
		if s, err := got(); err != nil || s != "pg_catalog, pg_temp" {
			t.Errorf("%s: search_path %q (%v), want pg_catalog, pg_temp", name, s, err)
		}
	}
}
