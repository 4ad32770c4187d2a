// Package console is the operator console: web pages over internal/store
// (the same statements and SQL functions as the CLI), served by
// `outbox-relay console`. It needs only the database.
package console

import (
	"cmp"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

// ListenDefault is where the console listens unless told otherwise:
// loopback only.
const ListenDefault = "127.0.0.1:8080"

// MinTokenLength is the shortest token the console takes: a guess at a
// token must not be cheap.
const MinTokenLength = 16

// Config configures the console.
type Config struct {
	// Listen is the address to listen on (ListenDefault when empty).
	Listen string
	// ReadToken and AdminToken authenticate requests (HTTP basic auth,
	// the token as the password, any user name; or a bearer token). The
	// read-only token shows no action. With neither, only a loopback
	// address is allowed and every request is admin. Each is
	// MinTokenLength characters at least, and they differ.
	ReadToken, AdminToken string
	// AllowedHosts are the names (or addresses) the console is served
	// under, besides Listen's host and, when Listen is on loopback (or on
	// every address), the loopback names and addresses: a request with
	// another Host header is refused (421), so that a page that rebinds its
	// own name to the console's address reads and changes nothing.
	AllowedHosts []string
	// TLSCertFile and TLSKeyFile, both or neither: serve HTTPS with this
	// certificate (PEM) and its key.
	TLSCertFile, TLSKeyFile string
	// Prefix is the path the console is served under behind a reverse
	// proxy ("/outbox"); "" for the root.
	Prefix string
	// RelayMetrics are running relays' metrics URLs: the overview shows
	// each one's role, breaker and slot lag.
	RelayMetrics []string
	// Walk is how many rows a page of the event list reads at most to find
	// its events (store.EventsWalkDefault when 0): a filter few rows match
	// searches a big table a step per page.
	Walk int
	// Bounds bound the overview's counts (store.OverviewBoundsDefault
	// for zero fields).
	Bounds store.OverviewBounds
	// Logger logs each action, the details of each error, and a warning
	// when the console is served off loopback without TLS (none when nil).
	Logger *zap.Logger
	// FailedKeyPolicy is the relays' --failed-key-policy: "hold" shows the
	// held keys (pages, counts, links); "continue" (or "") shows none, since
	// no key can be held.
	FailedKeyPolicy string
	// FlagPrefix is what the flags that errors name start with after
	// "--": "" for the console command, "console-" for run's (whose
	// --listen is --console-addr).
	FlagPrefix string
}

// flag is the name of the flag that sets name, for errors.
func (c Config) flag(name string) string {
	if name == "listen" && c.FlagPrefix != "" {
		return "--" + c.FlagPrefix + "addr"
	}
	return "--" + c.FlagPrefix + name
}

// Validate refuses what would expose the console: a non-loopback address
// without authentication, a short token, the same token for reading and
// changing.
func (c Config) Validate() error {
	host, _, err := net.SplitHostPort(c.listen())
	if err != nil {
		return fmt.Errorf("%s %q: %w", c.flag("listen"), c.listen(), err)
	}
	if c.ReadToken == "" && c.AdminToken == "" && !IsLoopbackHost(host) {
		return fmt.Errorf("%s %s is not a loopback address: set %s (and %s) so that only "+
			"operators can see and change the outbox", c.flag("listen"), c.listen(), c.flag("admin-token"), c.flag("read-token"))
	}
	for _, t := range []struct{ name, value string }{{"admin-token", c.AdminToken}, {"read-token", c.ReadToken}} {
		if t.value != "" && utf8.RuneCountInString(t.value) < MinTokenLength {
			return fmt.Errorf("%s: at least %d characters (this one has %d): a short token is guessed", c.flag(t.name),
				MinTokenLength, utf8.RuneCountInString(t.value))
		}
	}
	if c.AdminToken != "" && c.AdminToken == c.ReadToken {
		return fmt.Errorf("%s is the same as %s: the read-only token would change the outbox", c.flag("admin-token"), c.flag("read-token"))
	}
	for _, h := range c.AllowedHosts {
		if hostName(h) == "" {
			return fmt.Errorf("%s: %q is not a host name or address (console.example, 10.0.0.5, [2001:db8::5]; no scheme or path)",
				c.flag("allowed-hosts"), h)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("%s and %s go together: give both, or neither", c.flag("tls-cert-file"), c.flag("tls-key-file"))
	}
	if c.FailedKeyPolicy != "" && c.FailedKeyPolicy != "continue" && c.FailedKeyPolicy != "hold" {
		return fmt.Errorf("--failed-key-policy %q: continue or hold", c.FailedKeyPolicy)
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/")) {
		return fmt.Errorf("%s %q: start it with / and end it without one (/outbox)", c.flag("path-prefix"), c.Prefix)
	}
	return nil
}

func (c Config) listen() string {
	if c.Listen == "" {
		return ListenDefault
	}
	return c.Listen
}

// IsLoopbackHost reports whether host (without its port or brackets) names
// this machine only: localhost or a loopback address. The console and the
// relay's --debug-addr share it.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unspecified reports whether host is "every address" (0.0.0.0, ::, "").
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// hostName is the host of a Host header or a listen address, as the
// console compares them: without its port and IPv6 brackets, in lower
// case, without a final dot, an address in its canonical form; "" when it
// is neither a host name nor an address.
func hostName(h string) string {
	if host, port, err := net.SplitHostPort(h); err == nil && port != "" && strings.Trim(port, "0123456789") == "" {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	if h == "" || len(h) > 253 {
		return ""
	}
	for _, label := range strings.Split(h, ".") {
		if !hostLabel.MatchString(label) {
			return ""
		}
	}
	return h
}

// hosts are the Host headers the console serves.
type hosts struct {
	loopback bool // loopback names and addresses
	anyIP    bool // any address (listening on every address)
	names    map[string]bool
}

func newHosts(cfg Config) hosts {
	listen, _, _ := net.SplitHostPort(cfg.listen())
	listen = hostName(listen)
	h := hosts{loopback: IsLoopbackHost(listen) || unspecified(listen), anyIP: unspecified(listen), names: map[string]bool{}}
	if listen != "" {
		h.names[listen] = true
	}
	for _, a := range cfg.AllowedHosts {
		h.names[hostName(a)] = true
	}
	return h
}

// serves reports whether the console answers a request with Host header
// host. A page of another site can rebind its own name to the console's
// address, and then its Origin is its Host: only the names the console
// is served under are safe. An address is no such risk, but the console
// answers only its own (any, listening on every address).
func (h hosts) serves(host string) bool {
	host = hostName(host)
	switch {
	case host == "":
		return false
	case h.loopback && IsLoopbackHost(host), h.names[host]:
		return true
	}
	return h.anyIP && net.ParseIP(host) != nil
}

//go:embed templates/*.html
var templates embed.FS

//go:embed static
var static embed.FS

// Console serves the pages.
type Console struct {
	cfg   Config
	st    *store.Store
	tmpl  *template.Template
	now   func() time.Time
	log   *zap.Logger
	hosts hosts
	cert  *tls.Certificate // nil: plain HTTP
}

// New returns the console of st.
func New(st *store.Store, cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"age": func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
		// query is a URL query of name and value pairs.
		"query": func(kv ...string) template.URL {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return template.URL(v.Encode()) //nolint:gosec // encoded
		},
		"list": func(s ...string) []string { return s },
		// utc is a time as every page shows it: in UTC, labelled.
		"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") + " UTC" },
		"count": showCount,
		// visible shows the control characters, bidirectional overrides
		// and bytes that are not UTF-8 of a text from the database as
		// escapes (\x1b, \u202e), keeping its lines.
		"visible": termsafe.Text,
		// name shows a name from the database (a topic, a key, an event
		// type) as visible does, its newlines and tabs too.
		"name": termsafe.String,
		// clip is at most n bytes of a text from the database (whole
		// characters), then how long it is in all: one error of a
		// megabyte in each row would make a list of fifty.
		"clip": clip,
		// keyQuery is the key page's query for a topic's key.
		"keyQuery": func(topic, key string) template.URL {
			return template.URL(url.Values{"topic": {topic}, "key": {key}}.Encode()) //nolint:gosec // encoded
		},
		"num": func(n any) string { return thousands(reflectInt(n)) },
		// bounded is a count of up to bound rows: a lower bound when it
		// reached it.
		"bounded": func(n any, bound int) store.Count {
			return store.Count{N: reflectInt(n), AtLeast: reflectInt(n) >= int64(bound)}
		},
		"cell": func(c store.Count) string { // a table's cell: blank for none
			if c == (store.Count{}) {
				return ""
			}
			return showCount(c)
		},
	}).ParseFS(templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, st: st, tmpl: tmpl, now: time.Now, log: cmp.Or(cfg.Logger, zap.NewNop()), hosts: newHosts(cfg)}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", cfg.flag("tls-cert-file"), cfg.flag("tls-key-file"), err)
		}
		c.cert = &cert
	}
	return c, nil
}

// Handler is the console's HTTP handler: the security headers on every
// response, the Host check, authentication, then the pages; every change
// is a POST refused across origins.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("GET /static/{name}", staticFile)
	mux.HandleFunc("GET /failed", c.failed)
	if c.cfg.FailedKeyPolicy == "hold" {
		mux.HandleFunc("GET /held", c.held)
	}
	mux.HandleFunc("GET /actions", c.actions)
	mux.HandleFunc("GET /events", c.events)
	mux.HandleFunc("GET /events/{id}", c.event)
	mux.HandleFunc("GET /events/{id}/payload", c.payload)
	mux.HandleFunc("GET /keys", c.key)
	mux.HandleFunc("GET /topics", c.topics)
	mux.HandleFunc("GET /history", c.history)
	mux.HandleFunc("POST /resend", c.admin(c.act("resend")))
	mux.HandleFunc("POST /skip", c.admin(c.act("skip")))
	var h http.Handler = checkParams(http.NewCrossOriginProtection().Handler(mux))
	if prefix := c.cfg.Prefix; prefix != "" {
		stripped := http.StripPrefix(prefix, h)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == prefix { // the console's root, without its slash: stay under the prefix
				http.Redirect(w, r, prefix+"/", http.StatusMovedPermanently)
				return
			}
			stripped.ServeHTTP(w, r)
		})
	}
	return secureHeaders(c.checkHost(c.authenticate(h)))
}

// checkParams refuses (400, naming the parameter) a query or form value
// that is not UTF-8 text or holds a NUL byte: PostgreSQL takes neither as
// text, and a page could not show it.
func checkParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "400 bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		for name, values := range r.Form {
			for _, v := range append([]string{name}, values...) {
				switch {
				case !utf8.ValidString(v):
					http.Error(w, "400 bad request: parameter "+strconv.QuoteToASCII(name)+" is not UTF-8 text", http.StatusBadRequest)
					return
				case strings.ContainsRune(v, 0):
					http.Error(w, "400 bad request: parameter "+strconv.QuoteToASCII(name)+" holds a NUL byte", http.StatusBadRequest)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy lets a page load only the console's own script
// and style sheet, fetch only from it (the refresh), post forms only to
// it, and be framed by nobody.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// secureHeaders sets the headers of every response, errors and static
// files included: no cache keeps the outbox's data, no referrer carries a
// page's address (its filters) elsewhere, nothing is sniffed into a
// script, no inline code runs, no other site frames a page.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// checkHost refuses (421) a request whose Host the console is not served
// under: a DNS rebinding page's, whose Origin matches its Host.
func (c *Console) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.hosts.serves(r.Host) {
			c.log.Debug("console: a request for a host it does not serve", zap.String("host", r.Host),
				zap.String("remote_addr", r.RemoteAddr))
			http.Error(w, "421 misdirected request: the console is not served under this host name ("+
				c.cfg.flag("allowed-hosts")+" adds one)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// staticFile serves an embedded file of static/, and nothing else: no
// directory listing.
func staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	_, _ = w.Write(b) //nolint:errcheck // the client went away
}

// The server's timeouts: a page answers within a second on a big outbox
// (docs/operating.md: The console); an action on every matching FAILED row may take
// longer, and completes (and is logged) even past writeTimeout.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 2 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	shutdownTimeout   = 5 * time.Second
)

// Server is the console's HTTP server: its handler, timeouts, and TLS
// when configured (serve it with ServeTLS(ln, "", "")). Serve uses it.
func (c *Console) Server() *http.Server {
	s := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: zap.NewStdLog(c.log.Named("http"))}
	if c.cert != nil {
		s.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*c.cert}}
	}
	return s
}

// TLS reports whether the console serves HTTPS.
func (c *Console) TLS() bool { return c.cert != nil }

// Serve serves the console on ln until ctx ends, then stops, waiting up
// to shutdownTimeout for requests under way. Off loopback without TLS it
// warns first: tokens and payloads would cross the network in clear.
func (c *Console) Serve(ctx context.Context, ln net.Listener) error {
	srv := c.Server()
	if host, _, _ := net.SplitHostPort(c.cfg.listen()); c.cert == nil && !IsLoopbackHost(hostName(host)) {
		c.log.Warn("the console is served off loopback without TLS: its tokens and the outbox's payloads cross the "+
			"network in clear; give "+c.cfg.flag("tls-cert-file")+" and "+c.cfg.flag("tls-key-file")+", or put TLS in front "+
			"(docs/operating.md: The console)", zap.String("listen", c.cfg.listen()))
	}
	stopped := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close() //nolint:errcheck // stopping anyway
		}
	}()
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	close(served)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// role is what a request may do.
type role int

const (
	roleNone role = iota
	roleRead
	roleAdmin
)

type roleKey struct{}

// roleOf finds the request's role from its token.
func (c *Console) roleOf(r *http.Request) role {
	if c.cfg.ReadToken == "" && c.cfg.AdminToken == "" {
		return roleAdmin // loopback only (Validate)
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		_, token, _ = r.BasicAuth()
	}
	switch {
	case token == "":
		return roleNone
	case equal(token, c.cfg.AdminToken):
		return roleAdmin
	case equal(token, c.cfg.ReadToken):
		return roleRead
	}
	return roleNone
}

// equal compares a token with a configured one in constant time; an
// unset token matches nothing.
func equal(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *Console) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ro := c.roleOf(r)
		if ro == roleNone {
			w.Header().Set("WWW-Authenticate", `Basic realm="outbox-relay console", charset="UTF-8"`)
			http.Error(w, "a token is needed: the console's read-only or admin token as the password", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(withRole(r.Context(), ro)))
	})
}

// admin lets only admin requests through.
func (c *Console) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if roleFrom(r.Context()) != roleAdmin {
			c.log.Warn("console: an action refused to the read-only token", zap.String("remote_addr", r.RemoteAddr),
				zap.String("path", r.URL.Path))
			http.Error(w, "the read-only token cannot change the outbox", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

var errBadID = errors.New("not an event id")

// showCount shows a count: "1,234"; "≈ 1,234 ± 56" when estimated; "≥ 10,000"
// past a bound, with its estimate when there is one
// when counted up to a bound.
func showCount(c store.Count) string {
	switch {
	case c.Estimated:
		return "≈ " + thousands(c.N) + " ± " + thousands(c.Err)
	case c.AtLeast && c.Approx > 0:
		return "≥ " + thousands(c.N) + " (≈ " + thousands(c.Approx) + " ± " + thousands(c.Err) + ")"
	case c.AtLeast:
		return "≥ " + thousands(c.N)
	}
	return thousands(c.N)
}

// thousands writes n with a comma between each three digits: 250,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// reflectInt reads a template's integer.
func reflectInt(n any) int64 {
	switch n := n.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	return 0
}

// clip is s cut to at most n bytes at a character's start, then
// "… (N bytes in all)"; s itself when it is no longer than n.
func clip(n int, s string) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + thousands(int64(len(s))) + " bytes in all)"
}
