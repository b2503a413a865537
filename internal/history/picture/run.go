package picture

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/flexiq/flexiq-scaled/internal/workload/tickcsv"
)

// DrawRun draws a `simulate --workload` run and saves it to path, as
// format ("svg" or "png"; empty: by path's extension): the pending jobs in
// the upper panel, and in the lower one the workers (live, and live plus
// draining) against the running jobs, as steps over the trace's time. Two
// panels, because a backlog of hundreds would flatten a pool of twenty.
func DrawRun(path, format, title string, ticks []tickcsv.Row) error {
	if format == "" {
		format = strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	}
	if format != "svg" && format != "png" {
		return fmt.Errorf("%s: want a .svg or .png file", path)
	}
	if len(ticks) == 0 {
		return fmt.Errorf("no ticks to draw")
	}
	top, bottom := plot.New(), plot.New()
	top.Title.Text = title
	top.Title.TextStyle.Font.Size = vg.Points(10)
	top.Y.Label.Text = "jobs"
	bottom.X.Label.Text = "seconds since the trace's start"
	bottom.Y.Label.Text = "workers / jobs"
	for _, p := range []*plot.Plot{top, bottom} {
		p.Legend.Top = true
		p.Y.Min = 0
	}
	for _, s := range []struct {
		p    *plot.Plot
		name string
		v    func(tickcsv.Row) int
		c    color.RGBA
	}{
		{top, "pending jobs", func(t tickcsv.Row) int { return t.Pending }, color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff}},
		{bottom, "running jobs", func(t tickcsv.Row) int { return t.Running }, color.RGBA{R: 0x27, G: 0xae, B: 0x60, A: 0xff}},
		{bottom, "live + draining", func(t tickcsv.Row) int { return t.Live + t.Draining }, color.RGBA{R: 0x95, G: 0xa5, B: 0xa6, A: 0xff}},
		{bottom, "live workers", func(t tickcsv.Row) int { return t.Live }, color.RGBA{R: 0x2c, G: 0x6f, B: 0xbb, A: 0xff}},
	} {
		l, err := plotter.NewLine(runSteps(ticks, s.v))
		if err != nil {
			return err
		}
		l.Color = s.c
		l.Width = vg.Points(1)
		s.p.Add(l)
		s.p.Legend.Add(s.name, l)
	}
	// One time axis for both panels; headroom above the series for the
	// legend, which gonum/plot draws without a background.
	bottom.X.Min, bottom.X.Max = top.X.Min, top.X.Max
	for _, p := range []*plot.Plot{top, bottom} {
		// Rounded to a multiple of 10, so that the ticks stay whole numbers.
		p.Y.Max = math.Ceil(p.Y.Max*1.3/10) * 10
	}
	c, err := draw.NewFormattedCanvas(10*vg.Inch, 6*vg.Inch, format)
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(8)}
	cs := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, draw.New(c))
	top.Draw(cs[0][0])
	bottom.Draw(cs[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return f.Close()
}

// runSteps is v over the ticks as steps: a value holds until the tick that
// changes it, so only changes (and the last tick) need points.
func runSteps(ticks []tickcsv.Row, v func(tickcsv.Row) int) plotter.XYs {
	var xy plotter.XYs
	for i, t := range ticks {
		y := float64(v(t))
		switch {
		case i == 0:
			xy = append(xy, plotter.XY{X: t.T, Y: y})
		case y != xy[len(xy)-1].Y:
			xy = append(xy, plotter.XY{X: t.T, Y: xy[len(xy)-1].Y}, plotter.XY{X: t.T, Y: y})
		case i == len(ticks)-1:
			xy = append(xy, plotter.XY{X: t.T, Y: y})
		}
	}
	return xy
}
