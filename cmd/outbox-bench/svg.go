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
