package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func (b *bench) print() {
	fmt.Printf("\n%-31s %9s %8s %10s %7s %8s %8s %8s %8s %8s %7s %9s %9s %9s\n",
		"phase", "events", "seconds", "events/s", "vs dec", "p50 ms", "p95 ms", "p99 ms", "max ms", "RSS MiB", "CPU s", "CPU µs/ev", "broker s", "writer/s")
	for _, r := range b.res {
		vs := pct(r.VsDecode)
		if r.VsDrain > 0 {
			vs = pct(r.VsDrain) + "d"
		}
		fmt.Printf("%-31s %9d %8.2f %10.0f %7s %8s %8s %8s %8s %8s %7s %9s %9s %9s\n", r.Phase, r.Events, r.Seconds, r.EventsPerS,
			vs, num(r.P50ms), num(r.P95ms), num(r.P99ms), num(r.MaxMs), num(r.RSSMiB), num(r.CPUSeconds), num(r.CPUPerEvent), num(r.BrokerCPU), num(r.WriterRate))
	}
	fmt.Println("vs dec: the rate over the decode limit's (backfill, marked d: over the relay drain's). CPU µs/ev: the relay's CPU per event (steady phases: over the measured window; the pg_recvlogical and woken Go process rows: that process's, per event or wake-up). broker s: the development broker's CPU seconds over the same span.")
	cpu := map[string]float64{}
	for _, r := range b.res {
		cpu[r.Phase] = r.CPUPerEvent
	}
	if drain := cpu["relay drain"]; drain > 0 {
		for _, p := range []string{"stream @ 1000/s", "pg_recvlogical @ 1000/s", "Go process woken @ 1000/s"} {
			if v, ok := cpu[p]; ok {
				fmt.Printf("CPU per event, %s: %.1f× the relay drain's\n", p, v/drain)
			}
		}
	}
	for _, r := range b.res {
		if len(r.RunsPerS) > 1 {
			runs := make([]string, len(r.RunsPerS))
			for i, v := range r.RunsPerS {
				runs[i] = fmt.Sprintf("%.0f", v)
			}
			fmt.Printf("%s: median of %d runs (events/s: %s)\n", r.Phase, len(runs), strings.Join(runs, ", "))
		}
	}
	// The writer's rate at max beside each relay, as a share of its rate alone.
	rates := map[string]float64{}
	for _, r := range b.res {
		rates[r.Phase] = r.WriterRate
	}
	if alone := rates["writer alone (max)"]; alone > 0 {
		for _, p := range []string{"writer + pg_recvlogical (max)", "stream @ max/s", "poll @ max/s"} {
			if v, ok := rates[p]; ok {
				fmt.Printf("writer rate, %s: %.0f %% of the writer alone\n", p, 100*v/alone)
			}
		}
	}
}

func pct(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

func num(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func (b *bench) writeResults() error {
	if err := os.MkdirAll(b.o.outDir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	out := map[string]any{"when": time.Now().UTC().Format(time.RFC3339), "host": host, "cpus": numCPU(),
		"events": b.o.events, "writers": b.o.conns, "steady_duration_s": b.o.steady.Seconds(), "warmup_s": b.o.warmup.Seconds(), "results": b.res}
	if len(b.growth) > 0 {
		out["growth"] = b.growth
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if settings, err := b.serverSettings(ctx); err == nil {
		out["server_settings"] = settings
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	j, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(filepath.Join(b.o.outDir, "results.json"), j, 0o644); err != nil {
		return err
	}
	if len(b.growth) > 0 {
		if err := os.WriteFile(filepath.Join(b.o.outDir, "growth.svg"), growthSVG(b.growth), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nwrote %s\n", filepath.Join(b.o.outDir, "growth.svg"))
	}
	if len(b.res) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(b.o.outDir, "latency.svg"), latencySVG(b.res), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(b.o.outDir, "results.json"), filepath.Join(b.o.outDir, "latency.svg"))
	return nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// redraw renders latency.svg (and growth.svg, when it has a growth phase)
// from a results.json written earlier.
func redraw(path, outDir string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Results []Result `json:"results"`
		Growth  []Growth `json:"growth"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if len(doc.Growth) > 0 {
		if err := os.WriteFile(filepath.Join(outDir, "growth.svg"), growthSVG(doc.Growth), 0o644); err != nil {
			return err
		}
	}
	if len(doc.Results) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(outDir, "latency.svg"), latencySVG(doc.Results), 0o644)
}
