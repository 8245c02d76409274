package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// Figure size and PNG resolution: readable when shown at its natural size.
const (
	figureWidth  = 16 * vg.Centimeter
	figureHeight = 10 * vg.Centimeter
	pngDPI       = 150
)

// figure is a drawing of a given size: saved as .svg and .png, or inlined in a page.
type figure struct {
	name  string
	w, h  vg.Length
	paint func(draw.Canvas)
}

// plotFigure is a plot at the report's figure size.
func plotFigure(name string, p *plot.Plot) figure {
	return figure{name: name, w: figureWidth, h: figureHeight, paint: p.Draw}
}

// runFigures draws the figures of a run's focus dataset: accuracy, uncertainty and, with
// several turns, flips.
func runFigures(s uncertainty.Combined) ([]figure, error) {
	draws := []struct {
		name string
		draw func(uncertainty.Combined) (*plot.Plot, error)
	}{
		{"accuracy", accuracyFigure},
		{"uncertainty", uncertaintyFigure},
	}
	if s.Mean.Turns > 1 {
		draws = append(draws, struct {
			name string
			draw func(uncertainty.Combined) (*plot.Plot, error)
		}{"flips", flipsFigure})
	}
	var figures []figure
	for _, f := range draws {
		p, err := f.draw(s)
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", f.name, err)
		}
		figures = append(figures, plotFigure(f.name, p))
	}
	return figures, nil
}

// writeFigures saves the run's figures into dir and returns their names.
func writeFigures(dir string, s uncertainty.Combined) ([]string, error) {
	figures, err := runFigures(s)
	if err != nil {
		return nil, err
	}
	return saveFigures(dir, figures)
}

// saveFigures writes each figure's .svg and .png into dir and returns their names.
func saveFigures(dir string, figures []figure) ([]string, error) {
	var names []string
	for _, f := range figures {
		if err := saveDrawing(filepath.Join(dir, f.name), f.w, f.h, f.paint); err != nil {
			return nil, err
		}
		names = append(names, f.name)
	}
	return names, nil
}

// savePlot writes base.svg and base.png.
func savePlot(p *plot.Plot, base string) error {
	return saveDrawing(base, figureWidth, figureHeight, p.Draw)
}

// saveDrawing writes base.svg and base.png of a figure of any size that paint draws.
func saveDrawing(base string, w, h vg.Length, paint func(draw.Canvas)) error {
	svg := vgsvg.New(w, h)
	paint(draw.New(svg))
	if err := atomicfile.Write(base+".svg", writeAll(svg)); err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))
	paint(draw.New(img))
	return atomicfile.Write(base+".png", writeAll(vgimg.PngCanvas{Canvas: img}))
}

func writeAll(src io.WriterTo) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := src.WriteTo(w)
		return err
	}
}

// turnTicks labels the x axis with the turns 0..n-1.
func turnTicks(n int) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, n)
	for t := range ticks {
		ticks[t] = plot.Tick{Value: float64(t), Label: strconv.Itoa(t)}
	}
	return ticks
}

// percentAxis makes the y axis 0-100 % with room above for the legend at the top.
func percentAxis(p *plot.Plot) {
	p.Y.Min, p.Y.Max = 0, 140
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
		{Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
	p.Legend.Top = true
}

// errorPoints are points with symmetric error bars.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

// accuracyFigure draws each agent's accuracy per turn, strict solid and robust dashed,
// with ± one standard deviation over seeds when there are several.
func accuracyFigure(s uncertainty.Combined) (*plot.Plot, error) {
	focus := focusDataset(s.Mean)
	p := plot.New()
	p.Title.Text = "Accuracy per turn (" + focus + ")"
	p.X.Label.Text = "turn"
	p.Y.Label.Text = "pass@1 (%)"
	p.X.Tick.Marker = turnTicks(s.Mean.Turns)
	p.X.Min, p.X.Max = -0.2, float64(s.Mean.Turns-1)+0.2
	percentAxis(p)
	p.Add(plotter.NewGrid())
	modes := []struct {
		name   string
		value  func(uncertainty.Row) float64
		dashes []vg.Length
	}{
		{"strict", func(r uncertainty.Row) float64 { return r.AccStrict }, nil},
		{"robust", func(r uncertainty.Row) float64 { return r.AccRobust }, []vg.Length{vg.Points(5), vg.Points(3)}},
	}
	for a := range s.Mean.Agents {
		for _, m := range modes {
			pts := errorPoints{XYs: make(plotter.XYs, s.Mean.Turns), YErrors: make(plotter.YErrors, s.Mean.Turns)}
			for t := range s.Mean.Turns {
				mean, _ := s.Mean.Find(focus, a, t)
				std, _ := s.Std.Find(focus, a, t)
				pts.XYs[t] = plotter.XY{X: float64(t), Y: 100 * m.value(mean)}
				pts.YErrors[t].Low, pts.YErrors[t].High = 100*m.value(std), 100*m.value(std)
			}
			line, points, err := plotter.NewLinePoints(pts.XYs)
			if err != nil {
				return nil, err
			}
			line.Color, points.Color = plotutil.Color(a), plotutil.Color(a)
			line.Dashes = m.dashes
			points.Shape = plotutil.Shape(a)
			p.Add(line, points)
			p.Legend.Add(agentLabel(a)+" "+m.name, line, points)
			if s.Seeds > 1 {
				bars, err := plotter.NewYErrorBars(pts)
				if err != nil {
					return nil, err
				}
				bars.Color = plotutil.Color(a)
				p.Add(bars)
			}
		}
	}
	return p, nil
}

// uncertaintyFigure stacks the team's AU on its EU per turn and marks TU on top.
func uncertaintyFigure(s uncertainty.Combined) (*plot.Plot, error) {
	focus := focusDataset(s.Mean)
	turns := s.Mean.Turns
	eu, au := make(plotter.Values, turns), make(plotter.Values, turns)
	tu := make(plotter.XYs, turns)
	top := 0.0
	for t := range turns {
		r, _ := s.Mean.Find(focus, uncertainty.System, t)
		eu[t], au[t] = r.EU, r.AU
		tu[t] = plotter.XY{X: float64(t), Y: r.TU}
		top = max(top, r.TU)
	}
	p := plot.New()
	p.Title.Text = "Team uncertainty per turn (" + focus + ")"
	p.X.Label.Text = "turn"
	p.Y.Label.Text = "nats"
	// Room above the highest bar for the legend.
	p.Y.Min, p.Y.Max = 0, 1.5*max(top, 0.1)
	p.Legend.Top = true
	width := figureWidth / vg.Length(2*turns+2)
	euBars, err := plotter.NewBarChart(eu, width)
	if err != nil {
		return nil, err
	}
	euBars.Color = plotutil.Color(4)
	auBars, err := plotter.NewBarChart(au, width)
	if err != nil {
		return nil, err
	}
	auBars.Color = plotutil.Color(6)
	auBars.StackOn(euBars)
	line, points, err := plotter.NewLinePoints(tu)
	if err != nil {
		return nil, err
	}
	line.Color, points.Color = plotutil.Color(0), plotutil.Color(0)
	p.Add(euBars, auBars, line, points)
	p.Legend.Add("EU (Jensen-Shannon)", euBars)
	p.Legend.Add("AU (mean entropy)", auBars)
	p.Legend.Add("TU = EU + AU", line, points)
	p.NominalX(turnLabels(turns)...)
	padBars(p, turns)
	return p, nil
}

// padBars keeps n bars at x = 0..n-1 clear of the plot's edges.
func padBars(p *plot.Plot, n int) {
	p.X.Min, p.X.Max = -0.7, float64(n-1)+0.7
}

func turnLabels(n int) []string {
	labels := make([]string, n)
	for t := range labels {
		labels[t] = strconv.Itoa(t)
	}
	return labels
}

// flipsFigure stacks C2C, C2W, W2C and W2W (strict grading) for each agent, from turn 0
// to turn 1 and from turn 0 to the last turn.
func flipsFigure(s uncertainty.Combined) (*plot.Plot, error) {
	focus := focusDataset(s.Mean)
	targets := flipTargets(s.Mean.Turns)
	var labels []string
	var rows []uncertainty.Flips
	for a := range s.Mean.Agents {
		for _, t := range targets {
			r, _ := s.Mean.Find(focus, a, t)
			labels = append(labels, fmt.Sprintf("%s 0→%d", agentLabel(a), t))
			rows = append(rows, r.FromStart.Strict)
		}
	}
	p := plot.New()
	p.Title.Text = "Correctness transitions from turn 0, strict (" + focus + ")"
	p.Y.Label.Text = "share of trajectories (%)"
	percentAxis(p)
	width := figureWidth / vg.Length(2*len(labels)+2)
	var below *plotter.BarChart
	for i, c := range flipColumns[:4] {
		values := make(plotter.Values, len(rows))
		for j, f := range rows {
			values[j] = 100 * c.value(f)
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		if below != nil {
			bars.StackOn(below)
		}
		p.Add(bars)
		p.Legend.Add(strings.ToUpper(c.name), bars)
		below = bars
	}
	p.NominalX(labels...)
	padBars(p, len(labels))
	return p, nil
}
