package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/console"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// request sends method path to srv with Host host ("": srv's own), the
// token (none: "") and a form (nil: none), as a page of host's origin would.
func request(t *testing.T, srv *httptest.Server, method, path, host, token string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if host != "" {
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if token != "" {
		req.SetBasicAuth("operator", token)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// refused reports whether code is how the console refuses a request for a
// host it does not serve.
func refused(code int) bool {
	return code == http.StatusMisdirectedRequest || code == http.StatusForbidden
}

func TestConsole_ADNSRebindingPageCannotReadOrChangeTheOutbox(t *testing.T) {
	t.Parallel()
	// The five-minute tour's (README.md) and the demo's setup: loopback, no token.
	srv, ids, dbURL := serveConfig(t, console.Config{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	rebind := "rebind.example:" + port // the attacker's name, now resolving to 127.0.0.1
	resp, body := request(t, srv, http.MethodGet, "/events/"+ids[0]+"?payload=show", rebind, "", nil)
	if !refused(resp.StatusCode) || strings.Contains(body, `id="payload"`) {
		t.Errorf("a payload read through a rebound name: %d, want 421 or 403\n%s", resp.StatusCode, body)
	}
	resp, _ = request(t, srv, http.MethodPost, "/skip", rebind, "",
		url.Values{"match": {"yes"}, "topic": {"orders"}, "confirm": {"yes"}})
	if n := pgtest.Count(t, pgtest.Pool(t, dbURL), `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'`); !refused(resp.StatusCode) || n != 2 {
		t.Errorf("a skip of every FAILED event of a topic through a rebound name: %d, %d FAILED left; want 421 or 403 and 2", resp.StatusCode, n)
	}
	// The console's own names still work: loopback names and addresses, any case.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.0.0.2:" + port} {
		if resp, _ := request(t, srv, http.MethodGet, "/events/"+ids[0], host, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, resp.StatusCode)
		}
	}
}

func TestConsole_ServesOnlyTheHostsItListensForOrIsAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		cfg       console.Config
		ok, nopes []string
	}{
		{"loopback without a token", console.Config{},
			[]string{"127.0.0.1", "localhost:8080", "[::1]:8080", "127.1.2.3:8080", "localhost."},
			[]string{"rebind.example:8080", "localhost.rebind.example", "127.0.0.1.nip.io", "10.0.0.5", ""}},
		{"loopback without a token, a name allowed", console.Config{AllowedHosts: []string{"Outbox.Internal"}},
			[]string{"outbox.internal:8080", "OUTBOX.INTERNAL", "localhost"},
			[]string{"rebind.example", "internal"}},
		{"an address with a token", console.Config{Listen: "10.0.0.5:8080", AdminToken: adminToken},
			[]string{"10.0.0.5:8080", "10.0.0.5"},
			[]string{"console.example", "127.0.0.1", "localhost", "10.0.0.6"}},
		{"an address with a token and allowed names", console.Config{Listen: "10.0.0.5:8080", AdminToken: adminToken,
			AllowedHosts: []string{"console.example", "[2001:db8::1]"}},
			[]string{"console.example:443", "Console.Example", "[2001:db8::1]:8080", "10.0.0.5"},
			[]string{"other.example", "console.example.evil", "localhost"}},
		{"every address with a token", console.Config{Listen: ":8080", AdminToken: adminToken},
			[]string{"192.0.2.7:8080", "[2001:db8::7]"},
			[]string{"console.example", "rebind.example:8080"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			con, err := console.New(store.New(nil), c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := con.Handler()
			code := func(host string) int {
				req := httptest.NewRequest(http.MethodGet, "/static/console.js", nil)
				req.Host = host
				req.SetBasicAuth("operator", adminToken)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w.Code
			}
			for _, host := range c.ok {
				if got := code(host); got != http.StatusOK {
					t.Errorf("Host %q: %d, want 200", host, got)
				}
			}
			for _, host := range c.nopes {
				if got := code(host); !refused(got) {
					t.Errorf("Host %q: %d, want 421 or 403", host, got)
				}
			}
		})
	}
}

// checkHeaders fails unless resp carries every header the console sends.
func checkHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for k, want := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
		"X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s (%d): %s %q, want %q", what, resp.StatusCode, k, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'", "script-src 'self'", "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s (%d): Content-Security-Policy %q lacks %s", what, resp.StatusCode, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("%s: Content-Security-Policy %q allows inline code", what, csp)
	}
}

func TestConsole_EveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	srv, ids, _ := serve(t, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for _, c := range []struct {
		method, path, host, token string
		form                      url.Values
		want                      int
	}{
		{"GET", "/", "", adminToken, nil, 200},
		{"GET", "/failed", "", adminToken, nil, 200},
		{"GET", "/held", "", adminToken, nil, 200},
		{"GET", "/actions", "", readToken, nil, 200},
		{"GET", "/events", "", adminToken, nil, 200},
		{"GET", "/history?topic=orders", "", readToken, nil, 200},
		{"GET", "/events/" + ids[0] + "?payload=show", "", readToken, nil, 200},
		{"GET", "/static/console.js", "", readToken, nil, 200},
		{"GET", "/static/console.css", "", readToken, nil, 200},
		{"GET", "/static/nope.js", "", readToken, nil, 404},
		{"GET", "/static/", "", readToken, nil, 404}, // no listing
		{"GET", "/static", "", readToken, nil, 404},
		{"GET", "/nope", "", readToken, nil, 404},
		{"GET", "/events/00000000-0000-0000-0000-000000000000", "", readToken, nil, 404},
		{"GET", "/events/not-an-id", "", readToken, nil, 400},
		{"GET", "/failed?after=x", "", readToken, nil, 400},
		{"GET", "/resend", "", adminToken, nil, 405},
		{"GET", "/", "", "", nil, 401},
		{"GET", "/", "rebind.example:" + port, adminToken, nil, 421},
		{"POST", "/skip", "", readToken, url.Values{"id": {ids[0]}}, 403},
		{"POST", "/skip", "", adminToken, url.Values{"id": {ids[0]}}, 200},
		{"POST", "/skip", "", adminToken, url.Values{"id": {"x"}}, 400},
		{"POST", "/skip", "", adminToken, url.Values{"id": {ids[0]}, "confirm": {"yes"}}, 303},
	} {
		resp, body := request(t, srv, c.method, c.path, c.host, c.token, c.form)
		what := c.method + " " + c.path
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", what, resp.StatusCode, c.want)
		}
		checkHeaders(t, what, resp)
		if c.path == "/static/" && strings.Contains(body, "console.js") {
			t.Errorf("/static/ lists its files:\n%s", body)
		}
	}
	// A cross-origin POST, refused by Go's CrossOriginProtection.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/skip", strings.NewReader("id="+ids[1]+"&confirm=yes"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.SetBasicAuth("operator", adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin POST: %d, want 403", resp.StatusCode)
	}
	checkHeaders(t, "a cross-origin POST", resp)
}

func TestConsole_RefusesShortTokensAndAnAdminTokenEqualToTheReadToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{AdminToken: "admin-5c1e"}, "--admin-token: at least 16 characters"},
		{console.Config{AdminToken: adminToken, ReadToken: "read-7f3a"}, "--read-token: at least 16 characters"},
		{console.Config{ReadToken: "read-7f3a"}, "--read-token: at least 16 characters"},
		{console.Config{AdminToken: adminToken, ReadToken: adminToken}, "--admin-token is the same as --read-token"},
		{console.Config{AdminToken: "short", FlagPrefix: "console-"}, "--console-admin-token: at least 16 characters"},
		{console.Config{TLSCertFile: "cert.pem"}, "--tls-cert-file and --tls-key-file"},
		{console.Config{TLSKeyFile: "key.pem"}, "--tls-cert-file and --tls-key-file"},
		{console.Config{AllowedHosts: []string{"http://console.example"}}, "--allowed-hosts"},
		{console.Config{AllowedHosts: []string{"console.example/outbox"}}, "--allowed-hosts"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if _, err := console.New(store.New(nil), c.cfg); err == nil {
			t.Errorf("%+v: a console made", c.cfg)
		}
	}
}

// observed is a logger whose entries the test reads.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

func TestConsole_LogsEveryActionInATableOperatorsCanRead(t *testing.T) {
	t.Parallel()
	log, logs := observed()
	srv, ids, dbURL := serveConfig(t, console.Config{ReadToken: readToken, AdminToken: adminToken, Logger: log})
	resp, _ := request(t, srv, http.MethodPost, "/skip", "", adminToken, url.Values{"sel": {ids[0]}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("skip: %d", resp.StatusCode)
	}
	shown := time.Now().UTC().Format(time.RFC3339Nano)
	resp, _ = request(t, srv, http.MethodPost, "/resend", "", adminToken,
		url.Values{"match": {"yes"}, "reason": {"INVALID_TOPIC"}, "shown": {shown}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resend all matching: %d", resp.StatusCode)
	}
	// Asked, not confirmed: not an action yet.
	request(t, srv, http.MethodPost, "/skip", "", adminToken, url.Values{"id": {ids[1]}})

	// Read as outbox_operator, as an operator would.
	rows, err := pgtest.Pool(t, pgtest.OperatorURL(dbURL)).Query(context.Background(),
		`SELECT token_role, remote_addr, action, filter::text, rows_changed FROM outbox.console_actions ORDER BY id`)
	if err != nil {
		t.Fatalf("reading outbox.console_actions as outbox_operator: %v", err)
	}
	var got []string
	for rows.Next() {
		var role, remote, action, filter string
		var n int64
		if err := rows.Scan(&role, &remote, &action, &filter, &n); err != nil {
			t.Fatal(err)
		}
		if host, _, _ := net.SplitHostPort(remote); host != "127.0.0.1" {
			t.Errorf("remote address %q, want 127.0.0.1:PORT", remote)
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(filter), &f); err != nil {
			t.Errorf("filter %q: %v", filter, err)
		}
		got = append(got, strings.Join([]string{role, action, filter, big.NewInt(n).String()}, " "))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	want := []string{`admin skip {"event_ids": ["` + ids[0] + `"]} 1`,
		`admin resend {"until": "` + shown + `", "reason": "INVALID_TOPIC"} 1`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("outbox.console_actions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// And in the console, for any token.
	if _, body := request(t, srv, http.MethodGet, "/actions", "", readToken, nil); !strings.Contains(body, `<td>skip</td><td class="err">{&#34;event_ids&#34;: [&#34;`+ids[0]+`&#34;]}</td><td class="n">1</td>`) {
		t.Errorf("the actions page:\n%s", body)
	}
	entries := logs.FilterMessage("console action").All()
	if len(entries) != 2 {
		t.Fatalf("%d log lines of actions, want 2: %v", len(entries), logs.All())
	}
	for _, k := range []string{"token_role", "remote_addr", "action", "filter", "rows_changed"} {
		if _, ok := entries[0].ContextMap()[k]; !ok {
			t.Errorf("the action's log line lacks %s: %v", k, entries[0].ContextMap())
		}
	}
}

func TestConsole_ANoticeShowsNoArbitraryText(t *testing.T) {
	t.Parallel()
	srv, ids, _ := serve(t, "")
	_, body := request(t, srv, http.MethodGet, "/failed?notice="+url.QueryEscape("Session expired: call +1 555 0100 to restore access"), "", readToken, nil)
	if strings.Contains(body, "555 0100") {
		t.Errorf("the page shows the notice's text:\n%s", body)
	}
	resp, _ := request(t, srv, http.MethodPost, "/skip", "", adminToken, url.Values{"sel": ids[:2], "confirm": {"yes"}})
	resp2, _ := request(t, srv, http.MethodPost, "/skip", "", adminToken, url.Values{"sel": ids[:2], "confirm": {"yes"}})
	_, done := request(t, srv, http.MethodGet, resp.Header.Get("Location"), "", readToken, nil)
	_, stale := request(t, srv, http.MethodGet, resp2.Header.Get("Location"), "", readToken, nil)
	if !strings.Contains(done, `<p class="notice">skip: 2 events</p>`) ||
		!strings.Contains(stale, "skip: 0 events; 2 were no longer FAILED and were left as they are") {
		t.Errorf("an action's notice:\n%s\n%s", done, stale)
	}
}

func TestConsole_ADatabaseErrorShowsAnIDAndLogsTheDetails(t *testing.T) {
	t.Parallel()
	log, logs := observed()
	// A database without the outbox schema: every read fails.
	c, err := console.New(store.New(pgtest.Pool(t, pgtest.NewDB(t))), console.Config{Logger: log, FailedKeyPolicy: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/failed", "/events", "/held", "/actions", "/topics", "/keys?topic=a&key=b"} {
		resp, body := request(t, srv, http.MethodGet, path, "", "", nil)
		m := regexp.MustCompile(`error id ([0-9a-f]{16})`).FindStringSubmatch(body)
		if resp.StatusCode != http.StatusServiceUnavailable || m == nil || strings.Contains(body, "does not exist") ||
			strings.Contains(body, "outbox.") || len(body) > 300 {
			t.Errorf("%s: %d, want 503, a short message with an error id and no detail:\n%s", path, resp.StatusCode, body)
			continue
		}
		found := false
		for _, e := range logs.FilterField(zap.String("error_id", m[1])).All() {
			found = strings.Contains(e.ContextMap()["error"].(string), "does not exist")
		}
		if !found {
			t.Errorf("%s: no log line with error id %s and the database's error: %v", path, m[1], logs.All())
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "console"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// serveOn serves c on a loopback port until the test ends, and returns
// its address.
func serveOn(t *testing.T, c *console.Console) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestConsole_ServesTLSItselfAndWarnsWithoutItOffLoopback(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	log, logs := observed()
	c, err := console.New(store.New(nil), console.Config{TLSCertFile: certFile, TLSKeyFile: keyFile, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, c)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := cl.Get("https://" + addr + "/static/console.js")
	if err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("over TLS: %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + addr + "/static/console.js"); err == nil && resp.StatusCode == http.StatusOK {
		t.Errorf("plain HTTP to the TLS console: %d", resp.StatusCode)
	}
	if n := logs.FilterMessageSnippet("without TLS").Len(); n != 0 {
		t.Errorf("a warning about TLS with TLS on loopback: %v", logs.All())
	}
	if _, err := console.New(store.New(nil), console.Config{TLSCertFile: keyFile, TLSKeyFile: keyFile}); err == nil ||
		!strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("a key as the certificate: %v", err)
	}

	// Told to listen on every address, without TLS: a warning.
	c, err = console.New(store.New(nil), console.Config{Listen: "0.0.0.0:8080", AdminToken: adminToken, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, c)
	pgtest.Eventually(t, 5*time.Second, "a warning", func() (bool, string) {
		return logs.FilterMessageSnippet("without TLS").Len() == 1, ""
	})
}

func TestConsole_TheServerHasReadWriteAndIdleTimeouts(t *testing.T) {
	t.Parallel()
	c, err := console.New(store.New(nil), console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server()
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("timeouts: read header %v, read %v, write %v, idle %v; max header bytes %d",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
}
