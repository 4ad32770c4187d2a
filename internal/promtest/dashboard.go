package promtest

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Dashboard is what the tests read of a Grafana dashboard.
type Dashboard struct {
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name, Type string
			Query      any `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is one panel and its queries.
type Panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Datasource  Datasource `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Thresholds *struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []Target `json:"targets"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Datasource   Datasource `json:"datasource"`
}

// Datasource names the data source a panel or query uses.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// ReadDashboard reads a dashboard's JSON.
func ReadDashboard(t testing.TB, path string) Dashboard {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// Expand is expr as Grafana sends it with every job and instance selected
// and $__rate_interval being rateInterval.
func Expand(expr string, rateInterval time.Duration) string {
	return strings.NewReplacer("$__rate_interval", strconv.Itoa(int(rateInterval.Seconds()))+"s",
		`"$job"`, `".*"`, `"$instance"`, `".*"`).Replace(expr)
}
