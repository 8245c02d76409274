package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// The training curves are six panels on one larger figure.
const (
	curvesWidth  = 24 * vg.Centimeter
	curvesHeight = 15 * vg.Centimeter
	// maxCurveLines is how many lines a panel shows per agent and turn; beyond it each
	// agent's turns are averaged into one line.
	maxCurveLines = 4
	// curvePoints is about how many points a training curve keeps: longer runs are
	// smoothed with a trailing mean so that step-to-step noise does not hide the trend.
	curvePoints = 25
	// maxMarkers is the most points a line marks with glyphs.
	maxMarkers = 40
)

// curveWindow is the number of steps the training curves average over.
func (r *training) curveWindow() int { return max(1, len(r.times)/curvePoints) }

// writeTrainingFigures saves the figures the run has data for and returns their names.
func writeTrainingFigures(dir string, r *training) ([]string, error) {
	figures, err := trainingFigures(r)
	if err != nil {
		return nil, err
	}
	return saveFigures(dir, figures)
}

// trainingFigures draws the figures the run has data for: validation, the training
// curves and the times per phase.
func trainingFigures(r *training) ([]figure, error) {
	var figures []figure
	if len(r.val) > 0 {
		p, err := validationFigure(r)
		if err != nil {
			return nil, fmt.Errorf("figure validation: %w", err)
		}
		figures = append(figures, plotFigure("validation", p))
	}
	if len(r.train) == 0 {
		return figures, nil
	}
	panels, err := curvePanels(r)
	if err != nil {
		return nil, fmt.Errorf("figure training: %w", err)
	}
	tiles := draw.Tiles{Rows: 2, Cols: 3, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	figures = append(figures, figure{name: "training", w: curvesWidth, h: curvesHeight, paint: func(c draw.Canvas) {
		canvases := plot.Align(panels, tiles, c)
		for i := range panels {
			for j, p := range panels[i] {
				p.Draw(canvases[i][j])
			}
		}
	}})
	p, err := timesFigure(r.times)
	if err != nil {
		return nil, fmt.Errorf("figure times: %w", err)
	}
	return append(figures, plotFigure("times", p)), nil
}

// addLine adds a line with points, coloured by agent and dashed by turn.
func addLine(p *plot.Plot, pts plotter.XYs, label string, colour, dashes int) error {
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color, points.Color = plotutil.Color(colour), plotutil.Color(colour)
	line.Dashes = plotutil.Dashes(dashes)
	points.Shape = plotutil.Shape(colour)
	thumbs := []plot.Thumbnailer{line}
	p.Add(line)
	if len(pts) <= maxMarkers {
		p.Add(points)
		thumbs = append(thumbs, points)
	}
	if label != "" {
		p.Legend.Add(label, thumbs...)
	}
	return nil
}

// validationFigure draws each agent's validation accuracy per turn against the step,
// and the team's majority vote (strict) where the validations have a summary.
func validationFigure(r *training) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Validation accuracy"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "accuracy (%)"
	p.Add(plotter.NewGrid())
	var lines []plotter.XYs
	series := func(value func(v trainlog.ValMetrics) (float64, bool)) plotter.XYs {
		var pts plotter.XYs
		for _, v := range r.val {
			if y, ok := value(v); ok {
				pts = append(pts, plotter.XY{X: float64(v.Step), Y: 100 * y})
			}
		}
		return pts
	}
	majority := summaryMetric(func(row uncertainty.Row) float64 { return row.MajStrict })
	for t := range r.turns {
		for a := range r.agents {
			pts := series(func(v trainlog.ValMetrics) (float64, bool) { return valAccuracy(v, a, t) })
			lines = append(lines, pts)
			if err := addLine(p, pts, fmt.Sprintf("%s turn %d", agentLabel(a), t), a, t); err != nil {
				return nil, err
			}
		}
		pts := series(func(v trainlog.ValMetrics) (float64, bool) { return majority(v, uncertainty.System, t) })
		if len(pts) == 0 {
			continue
		}
		lines = append(lines, pts)
		if err := addLine(p, pts, fmt.Sprintf("Team majority turn %d", t), r.agents, t); err != nil {
			return nil, err
		}
	}
	percentHeadroom(p, highest(lines...), len(lines))
	padSteps(p, r.val[0].Step, r.val[len(r.val)-1].Step)
	return p, nil
}

// padSteps keeps the steps first..last clear of the plot's edges and labels whole steps.
func padSteps(p *plot.Plot, first, last int) {
	pad := max(0.5, 0.03*float64(last-first))
	p.X.Min, p.X.Max = float64(first)-pad, float64(last)+pad
	p.X.Tick.Marker = stepTicks{}
}

// stepTicks marks whole steps, at most about 8 of them (1, 2 or 5 times a power of 10 apart).
type stepTicks struct{}

func (stepTicks) Ticks(lo, hi float64) []plot.Tick {
	every := 1
	for i := 0; (hi-lo)/float64(every) > 8; i++ {
		every = []int{1, 2, 5}[(i+1)%3] * int(math.Pow(10, float64((i+1)/3)))
	}
	var ticks []plot.Tick
	for s := int(math.Ceil(lo/float64(every))) * every; float64(s) <= hi; s += every {
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: strconv.Itoa(s)})
	}
	return ticks
}

// percentHeadroom makes the y axis 0 % up to the highest value with room above for a
// legend of n lines at the top.
func percentHeadroom(p *plot.Plot, top float64, n int) {
	p.Y.Min, p.Y.Max = 0, max(top, 10)*(1+0.12*float64(n))
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
}

// highest is the largest y of a plot's lines.
func highest(lines ...plotter.XYs) float64 {
	top := 0.0
	for _, l := range lines {
		for _, pt := range l {
			top = max(top, pt.Y)
		}
	}
	return top
}

// curvePanels are the training curves: accuracy, team reward, KL, entropy, gradient
// norm and clip fraction against the step, one line per agent and turn (or per agent,
// averaged over turns, when that would be too many lines).
func curvePanels(r *training) ([][]*plot.Plot, error) {
	panels := []struct {
		title string
		scale float64
		value func(trainlog.StepMetrics) float64
	}{
		{"Accuracy (%)", 100, func(m trainlog.StepMetrics) float64 { return m.Accuracy }},
		{"Team reward", 1, func(m trainlog.StepMetrics) float64 { return m.Team }},
		{"KL to reference", 1, func(m trainlog.StepMetrics) float64 { return m.KL }},
		{"Entropy (nats/token)", 1, func(m trainlog.StepMetrics) float64 { return m.Entropy }},
		{"Gradient norm", 1, func(m trainlog.StepMetrics) float64 { return m.GradNorm }},
		{"Clip fraction (%)", 100, func(m trainlog.StepMetrics) float64 { return m.ClipFrac }},
	}
	perTurn := r.agents*r.turns <= maxCurveLines
	grid := [][]*plot.Plot{make([]*plot.Plot, 3), make([]*plot.Plot, 3)}
	first, last := r.times[0].step, r.times[len(r.times)-1].step
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "step"
		p.Add(plotter.NewGrid())
		var lines []plotter.XYs
		for a := range r.agents {
			turns := []int{-1} // all turns together
			if perTurn {
				turns = turns[:0]
				for t := range r.turns {
					turns = append(turns, t)
				}
			}
			for _, t := range turns {
				pts := trailingMean(curve(r.train, a, t, pn.scale, pn.value), r.curveWindow())
				lines = append(lines, pts)
				label := ""
				if i == 0 { // one legend, on the first panel
					label = agentLabel(a) + " mean over turns"
					if t >= 0 {
						label = fmt.Sprintf("%s turn %d", agentLabel(a), t)
					}
				}
				if err := addLine(p, pts, label, a, max(t, 0)); err != nil {
					return nil, err
				}
			}
		}
		if i == 0 {
			percentHeadroom(p, highest(lines...), len(lines))
		}
		padSteps(p, first, last)
		grid[i/3][i%3] = p
	}
	return grid, nil
}

// curve is an agent's value at turn t (t < 0: the mean over its turns) per step.
func curve(train []trainlog.StepMetrics, agent, turn int, scale float64, value func(trainlog.StepMetrics) float64) plotter.XYs {
	sums, counts := map[int]float64{}, map[int]int{}
	var steps []int
	for _, m := range train {
		if m.Agent != agent || (turn >= 0 && m.Turn != turn) {
			continue
		}
		if counts[m.Step] == 0 {
			steps = append(steps, m.Step)
		}
		sums[m.Step] += value(m)
		counts[m.Step]++
	}
	slices.Sort(steps)
	pts := make(plotter.XYs, len(steps))
	for i, s := range steps {
		pts[i] = plotter.XY{X: float64(s), Y: scale * sums[s] / float64(counts[s])}
	}
	return pts
}

// trailingMean replaces each point's y by the mean over it and the window-1 points before.
func trailingMean(pts plotter.XYs, window int) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	var sum float64
	for i, pt := range pts {
		sum += pt.Y
		if i >= window {
			sum -= pts[i-window].Y
		}
		out[i] = plotter.XY{X: pt.X, Y: sum / float64(min(i+1, window))}
	}
	return out
}

// timesFigure stacks each step's seconds by phase; a step missing from the log is an
// empty bar.
func timesFigure(times []stepTimes) (*plot.Plot, error) {
	first, last := times[0].step, times[len(times)-1].step
	n := last - first + 1
	p := plot.New()
	p.Title.Text = "Seconds per step by phase"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "seconds"
	p.Legend.Top = true
	top := 0.0
	for _, s := range times {
		top = max(top, s.total)
	}
	// Room above the highest bar for the legend.
	p.Y.Min, p.Y.Max = 0, 1.6*max(top, 0.1)
	width := 0.8 * figureWidth / vg.Length(n+2)
	var below *plotter.BarChart
	var bars []*plotter.BarChart
	for i, ph := range phases {
		values := make(plotter.Values, n)
		for _, s := range times {
			values[s.step-first] = ph.value(s)
		}
		b, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		} else {
			b.XMin = float64(first)
		}
		p.Add(b)
		bars = append(bars, b)
		below = b
	}
	// The legend lists the phases top to bottom, as they are stacked.
	for i := len(bars) - 1; i >= 0; i-- {
		p.Legend.Add(phases[i].name, bars[i])
	}
	p.X.Min, p.X.Max = float64(first)-0.7, float64(last)+0.7
	p.X.Tick.Marker = stepTicks{}
	return p, nil
}
