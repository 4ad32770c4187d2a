package pgdial_test

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
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
