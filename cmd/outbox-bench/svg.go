package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// latencySVG draws p50, p95, p99 and max of every steady-state phase as
// grouped bars on a logarithmic millisecond axis.
func latencySVG(res []Result) []byte {
	var rows []Result
	for _, r := range res {
		if r.P50ms > 0 {
			rows = append(rows, r)
		}
	}
	const (
		left, top, plotH, groupW, barW = 70.0, 40.0, 300.0, 150.0, 24.0
		minLog, maxLog                 = -1.0, 5.0 // 0.1 ms to 100 s
	)
	width := left + groupW*float64(max(len(rows), 1)) + 150
	height := top + plotH + 90
	y := func(ms float64) float64 {
		l := math.Log10(math.Max(ms, 0.1))
		return top + plotH - (l-minLog)/(maxLog-minLog)*plotH
	}
	colors := []string{"#4c78a8", "#f58518", "#e45756", "#72b7b2"}
	names := []string{"p50", "p95", "p99", "max"}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">COMMIT-to-Kafka latency (ms, log scale)</text>`+"\n", left)
	for e := minLog; e <= maxLog; e++ {
		ms := math.Pow(10, e)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-150, y(ms), y(ms))
		label := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", ms), "0"), ".")
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(ms)+4, label)
	}
	for i, r := range rows {
		x0 := left + float64(i)*groupW + 10
		for j, v := range []float64{r.P50ms, r.P95ms, r.P99ms, r.MaxMs} {
			x := x0 + float64(j)*(barW+2)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"><title>%s %s: %.2f ms</title></rect>`+"\n",
				x, y(v), barW, top+plotH-y(v), colors[j], r.Phase, names[j], v)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+2*(barW+2), top+plotH+18, r.Phase)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">p50 %.1f, p99 %.0f ms</text>`+"\n",
			x0+2*(barW+2), top+plotH+34, r.P50ms, r.P99ms)
	}
	for j, n := range names {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			width-130, top+float64(j)*20, colors[j], width-112, top+float64(j)*20+11, n)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// growthSVG draws each of the growth phase's measures against the size of
// outbox.deliveries, one small panel a measure, every point labelled.
func growthSVG(gs []Growth) []byte {
	panels := []struct {
		name string
		v    func(Growth) float64
	}{
		{"relay drain (events/s)", func(g Growth) float64 { return g.DrainPerS }},
		{"stream @ 1000/s p50 (ms)", func(g Growth) float64 { return g.StreamP50ms }},
		{"stream @ 1000/s p99 (ms)", func(g Growth) float64 { return g.StreamP99ms }},
		{"p99 during the first sweep (ms)", func(g Growth) float64 { return g.StreamDuringSweepP99 }},
		{"p99 while retention deletes (ms)", func(g Growth) float64 { return g.RetentionP99ms }},
		{"retention (deleted/s)", func(g Growth) float64 { return g.RetentionPerS }},
		{"claim of 200 rows (ms)", func(g Growth) float64 { return g.ClaimMs }},
		{"gap sweep of 24 h, unpaced (ms)", func(g Growth) float64 { return g.SweepMs }},
		{"relay's first sweep, paced (s)", func(g Growth) float64 { return g.FirstSweepSeconds }},
		{"console overview (ms)", func(g Growth) float64 { return g.OverviewMs }},
		{"console FAILED (ms)", func(g Growth) float64 { return g.FailedMs }},
		{"relay peak RSS (MiB)", func(g Growth) float64 { return max(g.DrainRSSMiB, g.StreamRSSMiB) }},
		{"deliveries + events (MiB)", func(g Growth) float64 { return g.DeliveriesMiB + g.EventsMiB }},
	}
	const cols, pw, ph, pad = 4, 250.0, 150.0, 40.0
	rows := (len(panels) + cols - 1) / cols
	width, height := cols*(pw+pad)+pad, float64(rows)*(ph+pad+30)+50
	maxRows := 1
	for _, g := range gs {
		maxRows = max(maxRows, g.Rows)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">Cost against the size of outbox.deliveries (x: status rows, 0 to %s)</text>`+"\n", pad, rowsLabel(maxRows))
	for i, p := range panels {
		x0 := pad + float64(i%cols)*(pw+pad)
		y0 := 50 + float64(i/cols)*(ph+pad+30)
		top := 0.0
		for _, g := range gs {
			top = max(top, p.v(g))
		}
		top = max(top*1.2, 1e-9)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", x0, y0, p.name)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#bbb"/>`+"\n", x0, y0+8, pw, ph)
		x := func(rows int) float64 { return x0 + 10 + (pw-20)*float64(rows)/float64(maxRows) }
		y := func(v float64) float64 { return y0 + 8 + ph - ph*v/top }
		var pts []string
		for _, g := range gs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(g.Rows), y(p.v(g))))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#4c78a8" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
		for _, g := range gs {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#4c78a8"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
				x(g.Rows), y(p.v(g)), x(g.Rows), y(p.v(g))-6, short(p.v(g)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(g.Rows), y0+ph+22, rowsLabel(g.Rows))
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// rowsLabel writes a count of rows as 0, 200k, 5M.
func rowsLabel(n int) string {
	switch {
	case n >= 1000000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	case n >= 1000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// short writes a measure with the precision its size deserves.
func short(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
