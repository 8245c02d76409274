package report

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/umad-dev/umad/uncertainty"
)

// The paper's figures across runs, as .svg and .png in the comparison's directory.
const (
	Fig1 = "fig1-accuracy-entropy" // accuracy and mean token entropy per turn
	Fig2 = "fig2-uncertainty"      // Figs. 2 and 6: TU, EU and accuracy, a panel per configuration
	Fig3 = "fig3-base-trained"     // base vs trained uncertainty and accuracy, a panel per pair
	Fig5 = "fig5-flips"            // first-turn flip ratios across pairs of agents
)

// Series is one configuration in the figures: the mean over its seeds.
type Series struct {
	Name    string
	Summary uncertainty.Summary
}

// Pair is a configuration before and after training, for Fig. 3.
type Pair struct {
	Name          string
	Base, Trained uncertainty.Summary
}

// FigureLayout is what a figure drew: its grid of panels and, panel by panel in reading
// order, the title and the legend's entries.
type FigureLayout struct {
	Name       string
	Rows, Cols int
	Panels     []PanelLayout
}

// PanelLayout is one panel's title and legend entries.
type PanelLayout struct {
	Title  string
	Legend []string
}

// panel is a plot and what it shows.
type panel struct {
	p *plot.Plot
	PanelLayout
}

func newPanel(title, yLabel string, turns int) *panel {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "turn"
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = turnTicks(turns)
	p.X.Min, p.X.Max = -0.2, float64(turns-1)+0.2
	p.Add(plotter.NewGrid())
	return &panel{p: p, PanelLayout: PanelLayout{Title: title}}
}

// line adds a labelled line per turn of a summary's focus dataset.
func (pn *panel) line(s uncertainty.Summary, agent int, value func(uncertainty.Row) float64, label string, colour, dashes int) (float64, error) {
	focus := focusDataset(s)
	var pts plotter.XYs
	top := 0.0
	for t := range s.Turns {
		if r, ok := s.Find(focus, agent, t); ok {
			pts = append(pts, plotter.XY{X: float64(t), Y: value(r)})
			top = max(top, value(r))
		}
	}
	if len(pts) == 0 {
		return 0, nil // the summary lacks the row: no line, no legend entry
	}
	if err := addLine(pn.p, pts, label, colour, dashes); err != nil {
		return 0, err
	}
	pn.Legend = append(pn.Legend, label)
	return top, nil
}

// headroom sets the y axis from 0 to above top, leaving room for the legend at the top.
func (pn *panel) headroom(top float64) {
	pn.p.Y.Min, pn.p.Y.Max = 0, max(top, 1e-3)*(1+0.12*float64(len(pn.Legend)))
	pn.p.Legend.Top = true
	pn.p.Legend.TextStyle.Font.Size = vg.Points(8)
}

// panelGrid is the grid of n panels: up to three a row.
func panelGrid(n int) (rows, cols int) {
	cols = min(n, 3)
	return (n + cols - 1) / cols, cols
}

// Panel size in the multi-panel figures.
const (
	panelWidth  = 9 * vg.Centimeter
	panelHeight = 8 * vg.Centimeter
)

// saveFigure writes panels into base.svg and base.png, in a grid of up to three a row.
func saveFigure(dir, name string, panels []*panel) (FigureLayout, error) {
	rows, cols := panelGrid(len(panels))
	layout := FigureLayout{Name: name, Rows: rows, Cols: cols}
	for _, pn := range panels {
		layout.Panels = append(layout.Panels, pn.PanelLayout)
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	err := saveDrawing(filepath.Join(dir, name), vg.Length(cols)*panelWidth, vg.Length(rows)*panelHeight, func(c draw.Canvas) {
		for i, pn := range panels {
			pn.p.Draw(tiles.At(c, i%cols, i/cols))
		}
	})
	return layout, err
}

// WriteRunFigures draws the paper's figures across runs into dir: Fig. 1 and Fig. 2 (and
// 6) of runs, Fig. 3 where there are pairs, Fig. 5 where a run has two turns or more.
// It returns what each figure drew.
func WriteRunFigures(dir string, runs []Series, pairs []Pair) ([]FigureLayout, error) {
	figures := []struct {
		name string
		draw func() ([]*panel, error)
	}{
		{Fig1, func() ([]*panel, error) { return fig1(runs) }},
		{Fig2, func() ([]*panel, error) { return fig2(runs) }},
		{Fig3, func() ([]*panel, error) { return fig3(pairs) }},
		{Fig5, func() ([]*panel, error) { return fig5(runs) }},
	}
	var layouts []FigureLayout
	for _, f := range figures {
		panels, err := f.draw()
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", f.name, err)
		}
		if len(panels) == 0 {
			continue
		}
		layout, err := saveFigure(dir, f.name, panels)
		if err != nil {
			return nil, err
		}
		layouts = append(layouts, layout)
	}
	return layouts, nil
}

func maxTurns(sums ...uncertainty.Summary) int {
	n := 0
	for _, s := range sums {
		n = max(n, s.Turns)
	}
	return n
}

func accuracyPercent(r uncertainty.Row) float64 { return 100 * r.AccStrict }
func tokenEntropy(r uncertainty.Row) float64    { return r.TokenEntropy }
func totalU(r uncertainty.Row) float64          { return r.TU }
func epistemicU(r uncertainty.Row) float64      { return r.EU }
func aleatoricU(r uncertainty.Row) float64      { return r.AU }

// fig1 is Fig. 1: the team's accuracy and its mean token entropy per turn, a line per run.
func fig1(runs []Series) ([]*panel, error) {
	var sums []uncertainty.Summary
	for _, r := range runs {
		sums = append(sums, r.Summary)
	}
	turns := maxTurns(sums...)
	panels := []*panel{newPanel("Team accuracy per turn", "pass@1 (%)", turns), newPanel("Mean token entropy per turn", "nats", turns)}
	for j, value := range []func(uncertainty.Row) float64{accuracyPercent, tokenEntropy} {
		top := 0.0
		for i, r := range runs {
			t, err := panels[j].line(r.Summary, uncertainty.System, value, r.Name, i, 0)
			if err != nil {
				return nil, err
			}
			top = max(top, t)
		}
		panels[j].headroom(top)
	}
	return panels, nil
}

// fig2 is Figs. 2 and 6: per run, the team's TU and EU and each agent's accuracy (as a
// fraction, on the same axis) per turn.
func fig2(runs []Series) ([]*panel, error) {
	var panels []*panel
	for _, r := range runs {
		s := r.Summary
		pn := newPanel(r.Name+" ("+focusDataset(s)+")", "nats; accuracy as a fraction", s.Turns)
		top := 0.0
		for i, m := range []struct {
			label  string
			value  func(uncertainty.Row) float64
			dashes int
		}{{"TU", totalU, 0}, {"EU", epistemicU, 1}} {
			t, err := pn.line(s, uncertainty.System, m.value, m.label, 5-i, m.dashes) // brown TU, purple EU
			if err != nil {
				return nil, err
			}
			top = max(top, t)
		}
		for a := range s.Agents {
			t, err := pn.line(s, a, strictAccuracy, agentLabel(a)+" accuracy", a, 0)
			if err != nil {
				return nil, err
			}
			top = max(top, t)
		}
		pn.headroom(top)
		panels = append(panels, pn)
	}
	return panels, nil
}

// fig3 is Fig. 3: per pair, the team's EU and AU and each agent's accuracy (as a
// fraction) per turn, base dashed and trained solid, as the paper draws uncertainty
// against both agents' accuracy.
func fig3(pairs []Pair) ([]*panel, error) {
	var panels []*panel
	for _, pr := range pairs {
		pn := newPanel(pr.Name+": base vs trained", "nats; accuracy as a fraction", maxTurns(pr.Base, pr.Trained))
		type curve struct {
			label string
			agent int
			value func(uncertainty.Row) float64
		}
		curves := []curve{{"EU", uncertainty.System, epistemicU}, {"AU", uncertainty.System, aleatoricU}}
		for a := range max(pr.Base.Agents, pr.Trained.Agents) {
			curves = append(curves, curve{agentLabel(a) + " accuracy", a, strictAccuracy})
		}
		top := 0.0
		for c, m := range curves {
			for _, side := range []struct {
				name   string
				s      uncertainty.Summary
				dashes int
			}{{"base", pr.Base, 1}, {"trained", pr.Trained, 0}} {
				t, err := pn.line(side.s, m.agent, m.value, side.name+" "+m.label, c, side.dashes)
				if err != nil {
					return nil, err
				}
				top = max(top, t)
			}
		}
		pn.headroom(top)
		panels = append(panels, pn)
	}
	return panels, nil
}

// fig5 is Fig. 5: each agent's strict flip ratio from turn 0 to turn 1 (C2W + W2C), a
// group of bars per run that has a second turn.
func fig5(runs []Series) ([]*panel, error) {
	var names []string
	var debated []uncertainty.Summary
	agents := 0
	for _, r := range runs {
		if r.Summary.Turns > 1 {
			names = append(names, r.Name)
			debated = append(debated, r.Summary)
			agents = max(agents, r.Summary.Agents)
		}
	}
	if len(debated) == 0 {
		return nil, nil
	}
	pn := &panel{p: plot.New(), PanelLayout: PanelLayout{Title: "First-turn flip ratio (turn 0 → 1, strict)"}}
	pn.p.Title.Text = pn.Title
	pn.p.Y.Label.Text = "C2W + W2C (% of trajectories)"
	width := panelWidth / vg.Length(len(debated)*(agents+1)+1)
	top := 0.0
	for a := range agents {
		values := make(plotter.Values, len(debated))
		for i, s := range debated {
			if r, ok := s.Find(focusDataset(s), a, 1); ok {
				values[i] = 100 * r.FromPrevious.Strict.Ratio
				top = max(top, values[i])
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(a)
		bars.Offset = vg.Length(a)*width - vg.Length(agents-1)*width/2
		pn.p.Add(bars)
		pn.p.Legend.Add(agentLabel(a), bars)
		pn.Legend = append(pn.Legend, agentLabel(a))
	}
	pn.p.NominalX(names...)
	padBars(pn.p, len(names))
	pn.headroom(max(top, 10))
	return []*panel{pn}, nil
}
