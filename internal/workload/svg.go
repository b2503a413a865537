package workload

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG draws a run: the backlog in the upper panel, and the workers
// (live, and live plus draining) against the running jobs in the lower one,
// over the trace's time. It is plain SVG drawn here, so that the binary
// carries no plotting library.
func WriteSVG(w io.Writer, title string, ticks []Tick, r Result) error {
	const (
		width, height  = 960, 520
		left, right    = 60, 20
		top, gap, foot = 40, 40, 40
	)
	panelH := float64(height-top-gap-foot) / 2
	plotW := float64(width - left - right)
	tmax := math.Max(r.End, 1)
	var pmax, wmax float64 = 1, 1
	for _, t := range ticks {
		pmax = math.Max(pmax, float64(t.Pending))
		wmax = math.Max(wmax, float64(max(t.Current+t.Draining, t.Running, t.Desired)))
	}
	x := func(t float64) float64 { return left + plotW*t/tmax }
	y := func(v, vmax, y0 float64) float64 { return y0 + panelH - panelH*v/vmax }
	line := func(b *strings.Builder, colour string, val func(Tick) float64, vmax, y0 float64) {
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="`, colour)
		// Steps: a value holds until the tick that changes it, so only
		// changes (and the last tick) need points.
		var prev float64
		for i, t := range ticks {
			v := val(t)
			switch {
			case i == 0:
				fmt.Fprintf(b, "%.1f,%.1f ", x(t.T), y(v, vmax, y0))
			case v != prev:
				fmt.Fprintf(b, "%.1f,%.1f %.1f,%.1f ", x(t.T), y(prev, vmax, y0), x(t.T), y(v, vmax, y0))
			case i == len(ticks)-1:
				fmt.Fprintf(b, "%.1f,%.1f ", x(t.T), y(v, vmax, y0))
			}
			prev = v
		}
		b.WriteString("\"/>\n")
	}
	axes := func(b *strings.Builder, label string, vmax, y0 float64) {
		fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%g</text>`+"\n", left-4, y0+10, vmax)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">0</text>`+"\n", left-4, y0+panelH)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="12">%s</text>`+"\n", left+4, y0-4, html.EscapeString(label))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="32" font-size="11">%s</text>`+"\n", left, html.EscapeString(fmt.Sprintf(
		"worker-seconds %.0f (floor %.0f), wait p50 %.2f s p95 %.2f s p99 %.2f s, %d actions, peak %d workers",
		r.WorkerSeconds, r.Floor, r.WaitP50, r.WaitP95, r.WaitP99, r.Actions, r.Peak)))
	y1, y2 := float64(top), float64(top)+panelH+gap
	axes(&b, "pending jobs", pmax, y1)
	line(&b, "#c0392b", func(t Tick) float64 { return float64(t.Pending) }, pmax, y1)
	axes(&b, "workers: live (blue), live + draining (grey), running jobs (green)", wmax, y2)
	line(&b, "#27ae60", func(t Tick) float64 { return float64(t.Running) }, wmax, y2)
	line(&b, "#95a5a6", func(t Tick) float64 { return float64(t.Current + t.Draining) }, wmax, y2)
	line(&b, "#2c6fbb", func(t Tick) float64 { return float64(t.Current) }, wmax, y2)
	for i := 0; i <= 4; i++ {
		t := tmax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%.0f s</text>`+"\n", x(t), height-foot+16, t)
	}
	b.WriteString("</svg>\n")
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(b.String()); err != nil {
		return err
	}
	return bw.Flush()
}
