package report

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// WriteComparison writes runs side by side into dir: compare.md with per-turn tables of
// strict and robust accuracy and of the team's uncertainty (one column per run and
// agent, dataset by dataset), compare.csv with every row of every run, and the figure
// compare-uncertainty (.svg, .png) with every run's EU and AU per turn.
func WriteComparison(dir string, runs []Run) error {
	if len(runs) == 0 {
		return errors.New("compare runs: none given")
	}
	for i, r := range runs {
		if len(r.Summary.Mean.Rows) == 0 {
			return fmt.Errorf("compare runs: run %d (%s) has an empty summary", i, r.Name)
		}
	}
	if err := atomicfile.Write(filepath.Join(dir, CompareCSVFile), func(w io.Writer) error {
		return writeComparisonCSV(w, runs)
	}); err != nil {
		return err
	}
	p, err := comparisonFigure(runs)
	if err != nil {
		return fmt.Errorf("figure %s: %w", CompareFigure, err)
	}
	if err := savePlot(p, filepath.Join(dir, CompareFigure)); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, CompareFile), func(w io.Writer) error {
		return writeComparisonMarkdown(w, runs)
	})
}

// comparisonColumns are the figures compare.csv keeps.
var comparisonColumns = append(slices.Clone(accuracyColumns), uncertaintyColumns[:3]...)

func writeComparisonCSV(w io.Writer, runs []Run) error {
	records := [][]string{append([]string{"run", "seeds"}, rowsHeader(comparisonColumns)...)}
	for _, r := range runs {
		for _, rec := range rowRecords(r.Summary, comparisonColumns) {
			records = append(records, append([]string{r.Name, fmt.Sprint(r.Summary.Seeds)}, rec...))
		}
	}
	return writeCSV(w, records)
}

func writeComparisonMarkdown(w io.Writer, runs []Run) error {
	var b strings.Builder
	names := make([]string, len(runs))
	turns := 0
	var datasets []string // in first appearance, each run's own order
	for i, r := range runs {
		names[i] = markdownText(r.Name)
		turns = max(turns, r.Summary.Mean.Turns)
		for _, d := range r.Summary.Mean.Datasets {
			if !slices.Contains(datasets, d) {
				datasets = append(datasets, d)
			}
		}
	}
	fmt.Fprintf(&b, "# Debate evaluation: %s\n\n", strings.Join(names, " vs "))
	b.WriteString("Accuracy is pass@1 in percent (mean ± population standard deviation over seeds where a run has " +
		"several); uncertainty in nats. Turns count from 0; the paper's T is turn+1. – marks what a run lacks.\n\n")
	for _, r := range runs {
		if r.Protocol != "" {
			fmt.Fprintf(&b, "- %s: protocol %s.\n", markdownText(r.Name), r.Protocol)
		}
		if r.Partial != "" {
			fmt.Fprintf(&b, "- %s: PARTIAL, %s.\n", markdownText(r.Name), r.Partial)
		}
	}
	fmt.Fprintf(&b, "\n![Team EU and AU per turn, every run (%s)](%s.png)\n\n", markdownText(focusDataset(runs[0].Summary.Mean)), CompareFigure)
	for _, d := range datasets {
		fmt.Fprintf(&b, "## %s\n\n", markdownText(d))
		problemCounts(&b, runs, d)
		var accuracy, team []tableColumn
		for _, r := range runs {
			agents := agentIndices(r.Summary.Mean.Agents, false)
			accuracy = append(accuracy, runColumns(r.Name+" ", r.Summary, []string{d}, agents)...)
			team = append(team, tableColumn{header: r.Name, run: r.Summary, dataset: d, agent: uncertainty.System})
		}
		b.WriteString("Accuracy, strict grading:\n\n")
		turnTable(&b, turns, accuracy, percentCell(strictAccuracy))
		turnGainTable(&b, runs, d)
		b.WriteString("Accuracy, robust grading:\n\n")
		turnTable(&b, turns, accuracy, percentCell(robustAccuracy))
		b.WriteString("Team uncertainty:\n\n")
		turnTable(&b, turns, team, uncertaintyCell)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// problemCounts says how many problems each run has of dataset d, and warns where they
// differ: such runs answer other questions, and their accuracies do not compare.
func problemCounts(b *strings.Builder, runs []Run, d string) {
	var parts []string
	differ := false
	first := -1
	for _, r := range runs {
		row, ok := r.Summary.Mean.Find(d, uncertainty.System, 0)
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", markdownText(r.Name), row.Problems))
		if first < 0 {
			first = row.Problems
		}
		differ = differ || row.Problems != first
	}
	fmt.Fprintf(b, "Problems (n): %s.", strings.Join(parts, ", "))
	if differ {
		b.WriteString(" The runs differ in their problems: their accuracies are over other questions and do not compare.")
	}
	b.WriteString("\n\n")
}

// comparisonFigure draws each run's team EU (solid) and AU (dashed) per turn, on the
// first run's focus dataset.
func comparisonFigure(runs []Run) (*plot.Plot, error) {
	focus := focusDataset(runs[0].Summary.Mean)
	p := plot.New()
	p.Title.Text = "Team EU and AU per turn (" + focus + ")"
	p.X.Label.Text = "turn"
	p.Y.Label.Text = "nats"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	turns, top := 0, 0.0
	for i, r := range runs {
		s := r.Summary.Mean
		turns = max(turns, s.Turns)
		for j, m := range []struct {
			name  string
			value func(uncertainty.Row) float64
		}{{"EU", func(r uncertainty.Row) float64 { return r.EU }}, {"AU", func(r uncertainty.Row) float64 { return r.AU }}} {
			var pts plotter.XYs
			for t := range s.Turns {
				if row, ok := s.Find(focus, uncertainty.System, t); ok {
					pts = append(pts, plotter.XY{X: float64(t), Y: m.value(row)})
					top = max(top, m.value(row))
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
			if j == 1 {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(line, points)
			p.Legend.Add(r.Name+" "+m.name, line, points)
		}
	}
	p.X.Tick.Marker = turnTicks(turns)
	p.X.Min, p.X.Max = -0.2, float64(turns-1)+0.2
	p.Y.Min, p.Y.Max = 0, 1.5*max(top, 0.1) // room above for the legend
	return p, nil
}
