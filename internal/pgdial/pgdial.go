// Package pgdial opens the relay's PostgreSQL connections with TCP
// keepalives and a TCP user timeout, so that a dead network path (no RST,
// no FIN: a dropped NAT or firewall state, a hung host) fails a read or a
// write in bounded time instead of after the kernel's 15-minute retry limit.
// It also caps the segment size both ends use (MaxSegment), which keeps
// a loopback connection from stalling.
package pgdial

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"
)

// TimeoutDefault is how long a connection may go without the peer
// acknowledging what was sent, or answering keepalives, before it fails.
const TimeoutDefault = 30 * time.Second

// MaxSegment caps the TCP segment size (TCP_MAXSEG) of every connection, in
// both directions: the size is announced to PostgreSQL when the connection
// opens. It changes nothing on a real network, whose segments are smaller
// (1,448 bytes, or 8,948 with jumbo frames); it matters on loopback, whose
// MSS is 65,483 bytes. Linux sends a segment only once it fits the peer's
// window in full (silly window avoidance), and Linux 6.x sizes a receive
// window as the buffer times the ratio of payload to memory of the segments
// received, which small pgoutput messages bring down to about 63 KB, just
// under one loopback segment. The walsender, whose queue held full segments
// by then, sent nothing more (seen in 5 of 110 bench drains: 4 MB unsent,
// a 63,488-byte window, nothing sent for 14 s) until the stream's watchdog
// ended the connection. With 8 KiB segments any window the relay offers
// holds several.
const MaxSegment = 8 << 10

// Dialer returns a dial function for pgconn.Config.DialFunc: TCP keepalives
// start after a third of timeout of silence, probe every sixth of it, and
// the connection fails once data or probes stay unacknowledged for timeout
// (TCP_USER_TIMEOUT). Unix sockets are dialed as they are.
func Dialer(timeout time.Duration) pgconn.DialFunc {
	if timeout <= 0 {
		timeout = TimeoutDefault
	}
	d := &net.Dialer{
		Timeout: timeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     max(timeout/3, time.Second),
			Interval: max(timeout/6, time.Second),
			Count:    3,
		},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout.Milliseconds()))
				if serr != nil {
					serr = fmt.Errorf("setting TCP_USER_TIMEOUT: %w", serr)
					return
				}
				if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG, MaxSegment); serr != nil {
					serr = fmt.Errorf("setting TCP_MAXSEG: %w", serr)
				}
			})
			return cmp.Or(err, serr)
		},
	}
	return d.DialContext
}

// Apply sets cfg's dial function (used for its fallback hosts too) to
// Dialer(timeout).
func Apply(cfg *pgconn.Config, timeout time.Duration) {
	cfg.DialFunc = Dialer(timeout)
}

// Connect opens one connection to databaseURL through Dialer(timeout).
func Connect(ctx context.Context, databaseURL string, timeout time.Duration) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	Apply(&cc.Config, timeout)
	noJIT(&cc.Config)
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return conn, nil
}

// PoolConfig parses databaseURL for a pool whose connections use
// Dialer(timeout), without JIT (noJIT).
func PoolConfig(databaseURL string, timeout time.Duration) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	Apply(&pc.ConnConfig.Config, timeout)
	noJIT(&pc.ConnConfig.Config)
	return pc, nil
}

// noJIT turns JIT compilation off for the relay's sessions, unless the URL
// sets jit itself. Every statement the relay runs is short; a plan whose
// estimate crosses jit_above_cost (the claim's, on a queue of some
// thousands of rows) spent over a second compiling for a few milliseconds
// of work.
func noJIT(cfg *pgconn.Config) {
	if _, set := cfg.RuntimeParams["jit"]; !set {
		cfg.RuntimeParams["jit"] = "off"
	}
}
