// Package pgdial opens the relay's PostgreSQL connections with TCP
// keepalives and a TCP user timeout, so that a dead network path (no RST,
// no FIN: a dropped NAT or firewall state, a hung host) fails a read or a
// write in bounded time instead of after the kernel's 15-minute retry limit.
// It also caps the segment size both ends use (MaxSegment), which keeps
// a loopback connection from stalling, and gives every connection a
// search_path no other role can write to (SearchPath).
package pgdial

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
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

// SearchPath is the search_path of every connection the relay opens: the
// built-ins, then this session's temporary objects, and no schema another
// role can create objects in. A function or operator of a built-in's name
// in a schema on the path (public, writable by every role on PostgreSQL 14
// and on later clusters that kept that) would otherwise run in place of
// the built-in wherever its argument types fit better, with the rights of
// whoever runs the statement: migrate's owner, the relay, an operator
// (CVE-2018-1058). pg_temp is listed last: left out, it is searched
// first. Every object of the outbox is named with its schema.
const SearchPath = "pg_catalog, pg_temp"

// Apply sets cfg's dial function (used for its fallback hosts too) to
// Dialer(timeout), and its search_path to SearchPath, whatever the URL
// says: a startup parameter, it outranks the URL's options and what ALTER
// ROLE or ALTER DATABASE set.
func Apply(cfg *pgconn.Config, timeout time.Duration) {
	cfg.DialFunc = Dialer(timeout)
	cfg.RuntimeParams["search_path"] = SearchPath
}

// ErrBadURL marks a database URL that cannot be used as it is written.
// Errors wrapping it never show the URL: it may hold a password (pgconn's
// own parse errors quote it, hiding what they recognize as one).
var ErrBadURL = errors.New("not a PostgreSQL URL or key=value string that parses (not shown: it may hold a password)")

// CheckURL returns an error wrapping ErrBadURL, and holding no part of
// databaseURL, if pgx cannot parse it, or parses it so that a host name
// holds an @: a password with an unencoded @ (postgres://u:p@ss@db/app),
// whose part after the first @ pgx reads as part of the host, and which
// would then appear in every connection error.
func CheckURL(databaseURL string) error {
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("%w; percent-encode @ : / ? # %% and spaces in the user and the password (@ is %%40, %% is %%25)", ErrBadURL)
	}
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return fmt.Errorf("%w: after the user and password comes another @, which would be read as part of the host; "+
				"percent-encode an @ in the password as %%40", ErrBadURL)
		}
	}
	// pgx's and pgxpool's own settings (statement_cache_capacity,
	// pool_max_conns, ...), whose errors quote the URL too.
	if _, err := pgxpool.ParseConfig(databaseURL); err != nil {
		return fmt.Errorf("%w: a pgx setting in it (pool_max_conns, statement_cache_capacity, default_query_exec_mode, ...) "+
			"has a value it does not take", ErrBadURL)
	}
	return nil
}

// Connect opens one connection to databaseURL through Dialer(timeout).
func Connect(ctx context.Context, databaseURL string, timeout time.Duration) (*pgx.Conn, error) {
	if err := CheckURL(databaseURL); err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", ErrBadURL)
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
	if err := CheckURL(databaseURL); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", ErrBadURL)
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

// ErrLoginRefused marks a connection PostgreSQL refused for a reason that
// waiting cannot fix: a wrong password, an unknown role, a missing
// database, pg_hba.conf, TLS required but not offered. The relay and the
// CLI stop with exit code 2 for it.
var ErrLoginRefused = errors.New("postgres refused the connection")

// Explain turns a connection error that waiting cannot fix into one
// wrapping ErrLoginRefused, saying what PostgreSQL answered and which
// setting to check, without the attempts pgconn joins before it (a
// refused TLS attempt under sslmode=prefer read as the cause). Any other
// error (a server that is down or unreachable) is returned as it is.
func Explain(err error) error {
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
	)
	if err == nil || !errors.As(err, &connErr) {
		return err
	}
	who := fmt.Sprintf("user %q, database %q", connErr.Config.User, connErr.Config.Database)
	if !errors.As(err, &pgErr) {
		var (
			unknown  x509.UnknownAuthorityError
			hostname x509.HostnameError
			invalid  x509.CertificateInvalidError
			verify   *tls.CertificateVerificationError
		)
		switch {
		case strings.Contains(err.Error(), "server refused TLS connection"):
			return fmt.Errorf("%w (%s): the server does not offer TLS and --database-url requires it (sslmode=require "+
				"or verify-*); turn ssl on in the server, or set sslmode=prefer or disable", ErrLoginRefused, who)
		case errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
			return fmt.Errorf("%w (%s): PostgreSQL's TLS certificate is not trusted: %w; check sslrootcert in "+
				"--database-url (the CA that signed the server's certificate) and that the host is the one the "+
				"certificate names (sslmode=verify-full)", ErrLoginRefused, who, cause(err))
		}
		return err
	}
	var hint string
	switch {
	case pgErr.Code == "28P01":
		hint = "check the password in --database-url (or PGPASSWORD, or ~/.pgpass)"
	case pgErr.Code == "3D000":
		hint = "check the database name in --database-url: it must name the database that holds the outbox"
	case strings.HasPrefix(pgErr.Code, "28"):
		hint = "check the user in --database-url, and that pg_hba.conf lets it connect from here"
	case pgErr.Code == "42501" && connErr.Config.RuntimeParams["replication"] != "":
		user := quoteIdent(connErr.Config.User)
		hint = fmt.Sprintf("the relay's login role needs the REPLICATION attribute (a group's is not inherited): "+
			"ALTER ROLE %s REPLICATION (on Amazon RDS and Aurora: GRANT rds_replication TO %s; docs/running.md: Roles and privileges)", user, user)
	case pgErr.Code == "42501":
		hint = fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", quoteIdent(connErr.Config.Database), quoteIdent(connErr.Config.User))
	default:
		return err
	}
	return fmt.Errorf("%w (%s): %s (SQLSTATE %s); %s", ErrLoginRefused, who, pgErr.Message, pgErr.Code, hint)
}

// IsDenied reports whether PostgreSQL refused err's statement for want of
// a privilege (SQLSTATE 42501, insufficient_privilege): a grant is
// missing, which waiting does not fix.
func IsDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// quoteIdent quotes a role or database name for a statement to copy.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// cause is the innermost error of err's first chain: the certificate's
// own words, without the connection attempts pgconn wraps around them.
func cause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
