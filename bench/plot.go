package main

import (
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// targetStyle gives each target the same colour and marker in every plot.
var targetStyle = map[string]struct {
	color color.Color
	shape draw.GlyphDrawer
}{
	direct:     {color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}, draw.SquareGlyph{}},
	shardproxy: {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	nutcracker: {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.TriangleGlyph{}},
}

// plotKinds are a scaling run's PNGs: throughput, CPU per request and
// memory against the variable.
var plotKinds = []string{"ops", "cpu", "rss"}

// file returns the name of one of the run's PNGs: kind is one of plotKinds.
func (sc *scaling) file(kind string) string { return "scaling-" + sc.Name + "-" + kind + ".png" }

// plot draws the run's PNGs into dir: throughput, CPU per request and
// RSS against the variable, log-scaled x.
func (sc *scaling) plot(dir string) error {
	for _, kind := range plotKinds {
		p := plot.New()
		p.X.Label.Text = sc.XLabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		p.Y.Min = 0
		if kind == "ops" {
			p.Title.Text = "Throughput vs " + sc.Title
			p.Y.Label.Text = "requests per second"
			if sc.LogOps {
				p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
				p.Y.Min = math.Inf(1) // let the data set it: log scales exclude 0
			}
		} else if kind == "cpu" {
			p.Title.Text = "CPU per request vs " + sc.Title
			p.Y.Label.Text = "CPU µs per request (proxy; direct: server)"
		} else {
			p.Title.Text = "Memory vs " + sc.Title
			p.Y.Label.Text = "MiB (proxy's peak RSS; direct: server's RSS)"
		}
		drawn := false
		for _, t := range sc.Targets {
			pts := sc.series(t)
			if len(pts) == 0 {
				continue
			}
			var xys plotter.XYs
			for _, pt := range pts {
				y := pt.Sample.OpsPerSec
				switch kind {
				case "cpu":
					y = cpuOfTarget(t, pt.Sample)
				case "rss":
					y = float64(pt.RSSKiB) / 1024
					if pt.RSSKiB <= 0 {
						y = nan
					}
				}
				if !math.IsNaN(y) {
					xys = append(xys, plotter.XY{X: pt.X, Y: y})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			st := targetStyle[t]
			line.Color, points.Color, points.Shape = st.color, st.color, st.shape
			line.Width = vg.Points(1.5)
			p.Add(line, points)
			p.Legend.Add(t, line, points)
			drawn = true
		}
		if !drawn {
			// Nothing measured (every point failed): an empty plot, on
			// linear axes, which unlike log axes take an empty range.
			p.X.Scale, p.X.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
			p.Y.Scale, p.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
		}
		if err := p.Save(14*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, sc.file(kind))); err != nil {
			return err
		}
	}
	return nil
}
