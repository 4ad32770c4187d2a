package metrics

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prober says whether the relay is healthy (its loops make progress) and
// ready (it can deliver): nil, or why not.
type Prober interface {
	Healthy() error
	Ready() error
}

// Handler serves /metrics, /healthz and /readyz. Each scrape of /metrics
// (but Scrape's) lets the counts of topics it showed at 0 be added. The
// probes answer 200 with {"status":"ok"}, or 503 with
// {"status":"unavailable","reason":"..."}.
func (m *Metrics) Handler(p Prober) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == scrapeUserAgent { // status, the console: not what draws the rates
			metrics.ServeHTTP(w, r)
			return
		}
		scrape := m.beginScrape()
		metrics.ServeHTTP(w, r)
		m.endScrape(scrape)
	})
	mux.HandleFunc("/healthz", probe(p.Healthy))
	mux.HandleFunc("/readyz", probe(p.Ready))
	return mux
}

func probe(check func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := map[string]string{"status": "ok"}
		if err := check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			body = map[string]string{"status": "unavailable", "reason": err.Error()}
		}
		_ = json.NewEncoder(w).Encode(body) //nolint:errcheck // the client went away
	}
}
