// Package console is the operator console: web pages over internal/store
// (the same statements and SQL functions as the CLI), served by
// `outbox-relay console`. It needs only the database.
package console

import (
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

// ListenDefault is where the console listens unless told otherwise:
// loopback only.
const ListenDefault = "127.0.0.1:8080"

// Config configures the console.
type Config struct {
	// Listen is the address to listen on (ListenDefault when empty).
	Listen string
	// ReadToken and AdminToken authenticate requests (HTTP basic auth,
	// the token as the password, any user name; or a bearer token). The
	// read-only token shows no action. With neither, only a loopback
	// address is allowed and every request is admin.
	ReadToken, AdminToken string
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
}

// Validate refuses what would expose the console: a non-loopback address
// without authentication.
func (c Config) Validate() error {
	host, _, err := net.SplitHostPort(c.listen())
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.listen(), err)
	}
	if c.ReadToken == "" && c.AdminToken == "" && !loopback(host) {
		return fmt.Errorf("--listen %s is not a loopback address: set --admin-token (and --read-token) so that only "+
			"operators can see and change the outbox", c.listen())
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/")) {
		return fmt.Errorf("--path-prefix %q: start it with / and end it without one (/outbox)", c.Prefix)
	}
	return nil
}

func (c Config) listen() string {
	if c.Listen == "" {
		return ListenDefault
	}
	return c.Listen
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

//go:embed templates/*.html
var templates embed.FS

//go:embed static
var static embed.FS

// Console serves the pages.
type Console struct {
	cfg  Config
	st   *store.Store
	tmpl *template.Template
	now  func() time.Time
}

// New returns the console of st.
func New(st *store.Store, cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"age":   func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
		"list":  func(s ...string) []string { return s },
		"count": showCount,
		"num":   func(n any) string { return showCount(store.Count{N: reflectInt(n)}) },
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
	return &Console{cfg: cfg, st: st, tmpl: tmpl, now: time.Now}, nil
}

// Handler is the console's HTTP handler: authentication, then the pages;
// every change is a POST refused across origins.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /failed", c.failed)
	mux.HandleFunc("GET /held", c.held)
	mux.HandleFunc("GET /events", c.events)
	mux.HandleFunc("GET /events/{id}", c.event)
	mux.HandleFunc("POST /resend", c.admin(c.act("resend")))
	mux.HandleFunc("POST /skip", c.admin(c.act("skip")))
	var h http.Handler = http.NewCrossOriginProtection().Handler(mux)
	if c.cfg.Prefix != "" {
		h = http.StripPrefix(c.cfg.Prefix, h)
	}
	return c.authenticate(h)
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
			http.Error(w, "the read-only token cannot change the outbox", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

var errBadID = errors.New("not an event id")

// showCount shows a count: "1,234", "≈ 1,234" when estimated, "1,234+"
// when counted up to a bound.
func showCount(c store.Count) string {
	n := strconv.FormatInt(c.N, 10)
	for i := len(n) - 3; i > 0; i -= 3 {
		n = n[:i] + "," + n[i:]
	}
	switch {
	case c.Estimated:
		return "≈ " + n
	case c.AtLeast:
		return n + "+"
	}
	return n
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
