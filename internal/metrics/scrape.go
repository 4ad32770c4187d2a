package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	neturl "net/url"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/outbox-relay/outbox-relay/internal/redact"
)

// RelayState is what a running relay's metrics say of it (status, the
// console).
type RelayState struct {
	URL     string `json:"metrics_url"` // its password hidden
	Role    string `json:"role"`
	Breaker string `json:"kafka_breaker"`
	// Silence is the seconds since the server's last message on the
	// replication connection; Stalled since events in flight last made
	// progress (0 when none is in flight or the relay does not stream).
	Silence float64 `json:"replication_silence_seconds"`
	Stalled float64 `json:"stalled_seconds"`
	// SlotLag is the WAL its slot has not confirmed, in bytes, as it last
	// measured it.
	SlotLag float64 `json:"slot_lag_bytes"`
	Error   string  `json:"error,omitempty"`
}

// scrapeUserAgent marks Scrape's requests: they do not count as a scrape
// that showed a new topic's counters at 0 (Handler), or the relay would
// count its first events before Prometheus saw the 0.
const scrapeUserAgent = "outbox-relay-scrape"

// Scrape reads a running relay's metrics at url (within 5 s). What goes
// wrong is in Error.
func Scrape(ctx context.Context, url string) *RelayState {
	rs := &RelayState{URL: redact.URL(url)}
	on, values, err := scrapeGauges(ctx, url)
	if err != nil {
		rs.Error = redactedError(err)
		return rs
	}
	rs.Role, rs.Breaker = on["outbox_relay_role"], on["outbox_relay_kafka_breaker_state"]
	rs.Silence, rs.Stalled = values["outbox_relay_replication_silence_seconds"], values["outbox_relay_stalled_seconds"]
	rs.SlotLag = values["outbox_relay_slot_lag_bytes"]
	if rs.Role == "" {
		rs.Error = "no outbox_relay_role in the metrics: is this an outbox-relay?"
	}
	return rs
}

// Gauges reads the metrics at url (within 5 s) and returns each gauge's
// value, the highest of its samples.
func Gauges(ctx context.Context, url string) (map[string]float64, error) {
	_, values, err := scrapeGauges(ctx, url)
	return values, err
}

// scrapeGauges fetches the metrics at url (within 5 s) and reads their
// gauges (gaugesOn); an answer other than 200 is an error of its status.
func scrapeGauges(ctx context.Context, url string) (on map[string]string, values map[string]float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("User-Agent", scrapeUserAgent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, errors.New(resp.Status)
	}
	on, values = gaugesOn(resp.Body)
	return on, values, nil
}

// redactedError is err's text with the URL it quotes redacted: net/http
// hides the password of a request's URL, not a ?token=, and a URL that
// does not parse it quotes as it is.
func redactedError(err error) string {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		ue.URL = redact.URL(ue.URL)
	}
	return err.Error()
}

// gaugesOn reads Prometheus text (with the client library's own parser)
// and returns, for each gauge with one label, the label value of its sample
// that is 1 (the role, the state), and the value of each gauge: the highest
// of its samples (a relay has one slot). What cannot be parsed gives nothing.
func gaugesOn(r io.Reader) (on map[string]string, values map[string]float64) {
	on, values = map[string]string{}, map[string]float64{}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, _ := parser.TextToMetricFamilies(r)
	for name, f := range families {
		if f.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range f.GetMetric() {
			v, labels := m.GetGauge().GetValue(), m.GetLabel()
			if old, seen := values[name]; !seen || v > old {
				values[name] = v
			}
			if len(labels) == 1 && v == 1 {
				on[name] = labels[0].GetValue()
			}
		}
	}
	return on, values
}
