package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

// statusReport is what `status` prints; its JSON form is for scripts.
type statusReport struct {
	*store.Overview
	Pending          int64               `json:"pending"`
	OldestPendingAge float64             `json:"oldest_pending_age_seconds"`
	FailedTotal      int64               `json:"failed"`
	Relay            *metrics.RelayState `json:"relay,omitempty"`
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (err error) {
	fs := newFlags("status", getenv)
	fs.Describe("", "", "Replication slots and their lag, events by table, topic and status, FAILED events by reason; with\n"+
		"--metrics-url, a running relay's role and Kafka circuit breaker.")
	fs.Legacy("metrics-url", "format")
	var dbURL, metricsURL, format string
	databaseFlag(fs, &dbURL)
	fs.SecretURL(&metricsURL, "metrics-url", "", "a running relay's metrics, such as http://relay-1:9677/metrics: adds its role and breaker state")
	fs.String(&format, "format", "table", "table or json")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := checkFormat(format); err != nil {
		return err
	}
	st, closeDB, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer closeDB()
	defer func() { err = operatorDenied(ctx, st, err) }()
	o, err := st.Overview(ctx)
	if err != nil {
		return err
	}
	c, err := st.Counts(ctx)
	if err != nil {
		return err
	}
	rep := statusReport{Overview: o, Pending: c.Pending, OldestPendingAge: c.OldestPendingAge.Seconds(), FailedTotal: c.Failed}
	if metricsURL != "" {
		rep.Relay = metrics.Scrape(ctx, metricsURL)
	}
	if format == "json" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(termsafe.JSON(b), '\n'))
		return err
	}
	return rep.print(stdout)
}

func (r statusReport) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tPLUGIN\tACTIVE\tPID\tWAL STATUS\tLAG\tFAILOVER\tSYNCED")
	for _, s := range r.Slots {
		row(tw, s.Name, s.Plugin, s.Active, s.ActivePID, s.WALStatus, bytesText(s.LagBytes), yesNo(s.Failover), yesNo(s.Synced))
	}
	if len(r.Slots) == 0 {
		fmt.Fprintln(tw, "(no replication slot in this database)")
	}
	for _, sb := range r.StandbySlots {
		switch {
		case !sb.Exists:
			row(tw, "HELD BACK", "synchronized_standby_slots names "+sb.Name+", which does not exist: failover slots get no changes until it does", "")
		case !sb.Active:
			row(tw, "HELD BACK", fmt.Sprintf("synchronized_standby_slots names %s, whose standby is not connected: failover slots "+
				"get no changes past what it confirmed (%s behind)", sb.Name, bytesText(sb.BehindBytes)), "")
		default:
			row(tw, "STANDBY", fmt.Sprintf("%s (synchronized_standby_slots) streams, %s behind", sb.Name, bytesText(sb.BehindBytes)), "")
		}
	}
	fmt.Fprintln(tw, "\nTABLE\tTOPIC\tSTATUS\tEVENTS")
	for _, t := range r.Topics {
		row(tw, t.Table, cmp.Or(t.Topic, "(none)"), t.Status, t.Events)
	}
	fmt.Fprintln(tw)
	row(tw, "PENDING", r.Pending, "oldest due for "+time.Duration(r.OldestPendingAge*float64(time.Second)).Round(time.Second).String())
	row(tw, "FAILED", r.FailedTotal, "")
	for _, f := range r.Failed {
		row(tw, "  "+f.Reason, f.Events, "")
	}
	if rs := r.Relay; rs != nil {
		fmt.Fprintln(tw)
		if rs.Error != "" {
			row(tw, "RELAY", rs.URL, "unreachable: "+rs.Error)
		} else {
			row(tw, "RELAY", rs.URL, "role "+rs.Role+", kafka circuit breaker "+rs.Breaker)
			row(tw, "  last message from postgres", seconds(rs.Silence)+" ago", "")
			row(tw, "  events in flight without progress", seconds(rs.Stalled), "")
		}
	}
	return tw.Flush()
}

// yesNo prints a setting a server may not have ("-" before PostgreSQL 17).
func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "yes"
	}
	return "no"
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// seconds prints a gauge of seconds as a duration.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}
