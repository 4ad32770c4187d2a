package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/signal"
	"syscall"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/flagenv"
	"github.com/outbox-relay/outbox-relay/internal/pgdial"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/relay"
)

func consoleCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := newFlags("console", getenv)
	fs.Describe("", "", "Serve the operator console: the outbox's counts, FAILED events and held keys in a browser, with\n"+
		"resend and skip. Needs only the database (the role outbox_operator suffices); the relay need not run.")
	var dbURL string
	var cfg console.Config
	databaseFlag(fs, &dbURL)
	fs.String(&cfg.Listen, "listen", console.ListenDefault, "address to listen on; an address other than loopback needs --admin-token")
	fs.Secret(&cfg.AdminToken, "admin-token", "", "token (the password of HTTP basic auth, any user; 16 characters at least) that may see and change the outbox")
	fs.Secret(&cfg.ReadToken, "read-token", "", "token that may only see the outbox (16 characters at least, not the admin token): no action is shown or accepted")
	consoleServingFlags(fs, "", &cfg)
	fs.String(&cfg.Prefix, "path-prefix", "", "the path the console is served under behind a reverse proxy, such as /outbox")
	fs.String(&cfg.FailedKeyPolicy, "failed-key-policy", relay.FailedKeyContinue, "the relays' --failed-key-policy: with hold, the console shows the keys FAILED events hold; with continue, none can be held")
	fs.List(&cfg.RelayMetrics, "relay-metrics", "", "running relays' metrics URLs, comma-separated (http://relay-1:9677/metrics): the overview shows each one's role, Kafka breaker and slot lag")
	var logLevel, logFormat string
	fs.String(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.String(&logFormat, "log-format", "json", "json or console")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return flagenv.Usage(err)
	}
	log, err := newLogger(logLevel, logFormat, stderr)
	if err != nil {
		return flagenv.Usage(err)
	}
	defer log.Sync() //nolint:errcheck // best effort on exit
	cfg.Logger = log
	c, closeDB, err := openConsole(ctx, "--database-url", dbURL, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	scheme := "http"
	if c.TLS() {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "outbox-relay console on %s://%s%s/\n", scheme, ln.Addr(), cfg.Prefix)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return c.Serve(ctx, ln)
}

// consoleServingFlags defines the flags of which requests the console
// serves and how: --allowed-hosts, --tls-cert-file, --tls-key-file; run
// defines them with prefix "console-", so that they read the console
// command's variables (OUTBOX_CONSOLE_ALLOWED_HOSTS, ...).
func consoleServingFlags(fs *flagenv.Set, prefix string, cfg *console.Config) {
	cfg.FlagPrefix = prefix
	fs.List(&cfg.AllowedHosts, prefix+"allowed-hosts", "", "host names (or addresses) the console is served under, comma-separated, "+
		"besides the listen address and, on loopback, the loopback names: a request for another Host is refused (421)")
	fs.String(&cfg.TLSCertFile, prefix+"tls-cert-file", "", "serve HTTPS with this certificate (PEM; with --"+prefix+"tls-key-file)")
	fs.String(&cfg.TLSKeyFile, prefix+"tls-key-file", "", "the key of --"+prefix+"tls-cert-file (PEM)")
}

// openConsole opens a pool on dbURL (flag names it for errors), checks
// the outbox schema, and returns the console over it; closeDB closes the
// pool. The console command and run's --console-addr both use it.
func openConsole(ctx context.Context, flag, dbURL string, cfg console.Config) (c *console.Console, closeDB func(), err error) {
	if err := checkDatabaseURL(flag, dbURL); err != nil {
		return nil, nil, err
	}
	// The relay's pools: keepalives, and statements planned for their
	// values at each execution.
	st, err := store.Open(dbURL, relay.ReplicationTimeoutDefault)
	if err != nil { // "--database-url: ...": say which flag
		return nil, nil, fmt.Errorf("%s: %w", flag, errors.Unwrap(err))
	}
	if err := checkSchema(ctx, st); err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("connecting to postgres: %w", pgdial.Explain(err))
	}
	if c, err = console.New(st, cfg); err != nil {
		st.Close()
		return nil, nil, err
	}
	return c, st.Close, nil
}
