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
// in outbox_operator: it answers with the outbox's counts once up.
func TestConsole_ServedByItsCommandAndByRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:1")
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO outbox.events (topic, key, payload) VALUES ('orders', 'k', '{}')`); err != nil {
		t.Fatal(err)
	}
	alone := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	start(t, "outbox-relay", []string{"console", "--listen", alone, "--admin-token", "admin-1"},
		"OUTBOX_DATABASE_URL="+pgtest.OperatorURL(e.dbURL))
	byRun := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	e.relay(t, "--console-addr", byRun, "--console-database-url", pgtest.OperatorURL(e.dbURL))
	for _, addr := range []string{alone, byRun} {
		pgtest.Eventually(t, 30*time.Second, "the console at "+addr+" shows the SENT event", func() (bool, string) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			if addr == alone {
				req.SetBasicAuth("ops", "admin-1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			ok := resp.StatusCode == http.StatusOK && strings.Contains(string(b), `<td>orders</td><td>SENT</td><td class="n">1</td>`)
			return ok, fmt.Sprintf("%d %.200s", resp.StatusCode, b)
		})
	}
}
