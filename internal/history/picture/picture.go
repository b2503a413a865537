// Package picture draws a pool's history, and a `simulate --workload` run
// (run.go), with gonum/plot. It is its own
// package, linked only into the flexiq-scaled-plot helper, because
// gonum/plot parses a dozen embedded fonts when it is initialised: in the
// daemon's binary that cost about 4 MB of resident memory for a feature
// the daemon never uses (docs/performance.md).
package picture

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/flexiq/flexiq-scaled/internal/history"
)

// Draw draws the series with gonum/plot and saves them to path, as SVG or
// PNG by its extension: pending jobs, live workers and the target as steps
// over time (seconds since the first decision), scale-ups and scale-downs
// as triangles on the target.
func Draw(path, title string, pts []history.Point) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("%s: want a .svg or .png file", path)
	}
	if len(pts) == 0 {
		return fmt.Errorf("no decisions to draw")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since " + pts[0].Time.Local().Format(time.DateTime)
	p.Y.Label.Text = "jobs / workers"
	p.Legend.Top = true
	x := func(t time.Time) float64 { return t.Sub(pts[0].Time).Seconds() }
	// Steps: each value holds until the next decision.
	steps := func(v func(history.Point) (float64, bool)) plotter.XYs {
		var xy plotter.XYs
		for i, pt := range pts {
			y, ok := v(pt)
			if !ok {
				continue
			}
			if i > 0 && len(xy) > 0 {
				xy = append(xy, plotter.XY{X: x(pt.Time), Y: xy[len(xy)-1].Y})
			}
			xy = append(xy, plotter.XY{X: x(pt.Time), Y: y})
		}
		return xy
	}
	series := []struct {
		name string
		v    func(history.Point) (float64, bool)
		c    color.RGBA
	}{
		{"pending", func(p history.Point) (float64, bool) { return float64(p.Pending), p.Known }, color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}},
		{"live workers", func(p history.Point) (float64, bool) { return float64(p.Live), true }, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"target", func(p history.Point) (float64, bool) { return float64(p.Target), true }, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	}
	for _, s := range series {
		xy := steps(s.v)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = s.c
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	for _, ev := range []struct {
		action, name string
		shape        draw.GlyphDrawer
	}{{"scale-up", "scale-up", draw.TriangleGlyph{}}, {"scale-down", "scale-down", draw.PyramidGlyph{}}} {
		var xy plotter.XYs
		for _, pt := range pts {
			if pt.Action == ev.action {
				xy = append(xy, plotter.XY{X: x(pt.Time), Y: float64(pt.Target)})
			}
		}
		if len(xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = ev.shape
		sc.GlyphStyle.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(ev.name, sc)
	}
	if err := p.Save(8*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return nil
}
