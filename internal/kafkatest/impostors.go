package kafkatest

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Impostor is a loopback listener that is not a Kafka listener: what a
// wrong --kafka-brokers reaches.
type Impostor struct {
	Addr  string
	conns atomic.Int64
}

// Conns is how many connections it has accepted.
func (i *Impostor) Conns() int64 { return i.conns.Load() }

// NewImpostor starts an Impostor, closed when the test ends. It answers every
// connection with answer (after reading what the client sent, as an HTTP
// server reads a request), then closes it, or with keepOpen keeps it open
// until the test ends. A nil answer says nothing: the connection is closed
// at once, or with keepOpen held open in silence.
func NewImpostor(t testing.TB, answer []byte, keepOpen bool) *Impostor {
	t.Helper()
	imp := &Impostor{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			imp.conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				if answer == nil {
					if keepOpen {
						<-done
					}
					return
				}
				buf := make([]byte, 4096)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(buf); err != nil {
					return
				}
				_, _ = c.Write(answer)
				if keepOpen {
					<-done
				}
			})
		}
	})
	imp.Addr = ln.Addr().String()
	return imp
}

// HTTPAnswer is what a web server answers a request it cannot parse.
var HTTPAnswer = []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")

// Blackhole returns a loopback address whose connects hang, as with a
// firewall that drops packets: a listener whose accept queue is full, so
// the kernel drops every further SYN. Only loopback traffic is involved.
func Blackhole(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	// Fill the accept queue (nobody accepts) until a connect hangs.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return addr
		}
		if err != nil || i > 16 {
			t.Fatalf("could not make a connect to %s hang: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
	}
}
