package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// The console, as its own process and served by run, each through a role
// in outbox_operator: it answers with the outbox's counts once up, and
// the console of its own with the relay's role from its metrics. Each
// serves the hosts it is given (run's --console-allowed-hosts, the
// console's OUTBOX_CONSOLE_ALLOWED_HOSTS) and refuses another (421).
func TestConsole_ServedByItsCommandAndByRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:1")
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{}')`); err != nil {
		t.Fatal(err)
	}
	byRun := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	relay := e.relay(t, "--console-addr", byRun, "--console-database-url", pgtest.OperatorURL(e.dbURL),
		"--console-allowed-hosts", "console.example")
	alone := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	start(t, "outbox-relay", []string{"console", "--listen", alone, "--admin-token", "admin-5c1e-8d0f-a7b3",
		"--relay-metrics", relay.metricsURL(t) + "/metrics"}, "OUTBOX_DATABASE_URL="+pgtest.OperatorURL(e.dbURL),
		"OUTBOX_CONSOLE_ALLOWED_HOSTS=console.example")
	for _, addr := range []string{alone, byRun} {
		pgtest.Eventually(t, 30*time.Second, "the console at "+addr+" shows the SENT event", func() (bool, string) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			if addr == alone {
				req.SetBasicAuth("ops", "admin-5c1e-8d0f-a7b3")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			ok := resp.StatusCode == http.StatusOK && // orders: no PENDING, PROCESSING or FAILED, 1 SENT
				strings.Contains(string(b), `<a href="/events?topic=orders">orders</a></td><td class="n"></td><td class="n"></td><td class="n"></td><td class="n"><a href="/events?status=SENT&amp;topic=orders">1</a></td>`) &&
				// the console of its own sees the relay's role from its metrics
				(addr == byRun || strings.Contains(string(b), "<td>streaming</td><td>closed</td>"))
			return ok, fmt.Sprintf("%d %.200s", resp.StatusCode, b)
		})
		for host, want := range map[string]int{"console.example:8080": http.StatusOK, "rebind.example": http.StatusMisdirectedRequest} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/static/console.js", nil)
			req.Host = host
			req.SetBasicAuth("ops", "admin-5c1e-8d0f-a7b3")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("the console at %s, Host %s: %d, want %d", addr, host, resp.StatusCode, want)
			}
		}
	}
}
