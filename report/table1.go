package report

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// File names of Table 1, in the comparison's directory.
const (
	Table1File     = "table1.md"
	Table1CSVFile  = "table1.csv"
	Table1HTMLFile = "table1.html"
)

// Bootstrap resamples per interval, and its fixed seed: the same runs give the same files.
const (
	bootstrapResamples = 4000
	bootstrapSeed      = 31
)

// Method is one method of Table 1: the runs given one label, merged as seeds of one
// configuration, or a training run's last validation.
type Method struct {
	Name    string
	Summary uncertainty.Combined
	// Replicates are the seeds' problem records, empty where a run keeps only summaries
	// (a training run's validation): its differences then have no interval.
	Replicates []Replicate
}

// NewMethod merges runs into one method named name. Several runs count as seeds of one
// configuration; a seed given by two runs is told apart by its run's name, so it pairs
// with no other method's seed.
func NewMethod(name string, runs []Run) (Method, error) {
	if len(runs) == 1 {
		return Method{Name: name, Summary: runs[0].Summary, Replicates: runs[0].Replicates}, nil
	}
	m := Method{Name: name}
	count := map[string]int{}
	for _, r := range runs {
		if len(r.Replicates) == 0 {
			return Method{}, fmt.Errorf("method %s: run %s has no problem records to merge", name, r.Name)
		}
		for _, rep := range r.Replicates {
			count[rep.Key]++
		}
	}
	var seeds []uncertainty.Summary
	for _, r := range runs {
		for _, rep := range r.Replicates {
			if count[rep.Key] > 1 {
				rep.Key = r.Name + "/" + rep.Key
			}
			s, err := uncertainty.Summarise(rep.Problems)
			if err != nil {
				return Method{}, fmt.Errorf("method %s: run %s seed %s: %w", name, r.Name, rep.Key, err)
			}
			seeds = append(seeds, s)
			m.Replicates = append(m.Replicates, rep)
		}
	}
	var err error
	if m.Summary, err = uncertainty.CombineSeeds(seeds); err != nil {
		return Method{}, fmt.Errorf("method %s: %w", name, err)
	}
	return m, nil
}

// TableOptions choose Table 1's baseline row and turns.
type TableOptions struct {
	// Baseline names the method every cell is compared with; "" is the first.
	Baseline string
	// Turns are the paper's T (turn+1); none means T = 1, 2 and the longest debate's last.
	Turns []int
}

// table1 is Table 1's content: one row per method and agent, one column per dataset
// (then the Average) and T.
type table1 struct {
	baseline string
	datasets []string // the columns' datasets, uncertainty.Average last
	turns    []int    // 0-based
	rows     []tableRow
}

type tableRow struct {
	method string
	agent  int
	cells  []tableCell // datasets x turns, dataset-major
	browse bool        // the method's problems are in the browser beside the table (browserLink)
}

// tableCell is one accuracy (mean and std over seeds) and its difference from the
// baseline's; has says the method has the cell, diff whether the baseline has it too.
type tableCell struct {
	has, diff, ci bool
	mean, std     float64
	seeds         int
	delta, lo, hi float64 // difference and its 95% interval, as fractions
	problems      int     // problems paired
}

// significant says the interval excludes zero.
func (c tableCell) significant() bool { return c.ci && (c.lo > 0 || c.hi < 0) }

// WriteTable1 writes Table 1 of methods into dir: table1.md, table1.csv and table1.html.
func WriteTable1(dir string, methods []Method, opt TableOptions) error {
	t, err := buildTable1(methods, opt)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *table1) error
	}{{Table1CSVFile, writeTable1CSV}, {Table1HTMLFile, writeTable1HTML}, {Table1File, writeTable1Markdown}} {
		if err := atomicfile.Write(filepath.Join(dir, f.name), func(w io.Writer) error { return f.write(w, t) }); err != nil {
			return err
		}
	}
	return nil
}

func buildTable1(methods []Method, opt TableOptions) (*table1, error) {
	if len(methods) == 0 {
		return nil, errors.New("table 1: no methods")
	}
	base := 0
	if opt.Baseline != "" {
		base = slices.IndexFunc(methods, func(m Method) bool { return m.Name == opt.Baseline })
		if base < 0 {
			names := make([]string, len(methods))
			for i, m := range methods {
				names[i] = m.Name
			}
			return nil, fmt.Errorf("table 1: no method named %q (methods: %s)", opt.Baseline, strings.Join(names, ", "))
		}
	}
	t := &table1{baseline: methods[base].Name}
	maxTurns := 0
	for _, m := range methods {
		maxTurns = max(maxTurns, m.Summary.Mean.Turns)
		for _, d := range m.Summary.Mean.Datasets {
			if d != uncertainty.Average && !slices.Contains(t.datasets, d) {
				t.datasets = append(t.datasets, d)
			}
		}
	}
	if len(t.datasets) > 1 {
		t.datasets = append(t.datasets, uncertainty.Average)
	}
	turns := opt.Turns
	if len(turns) == 0 {
		turns = []int{1, 2, maxTurns}
	}
	for _, T := range turns {
		if T < 1 {
			return nil, fmt.Errorf("table 1: T=%d: turns count from T=1", T)
		}
		if T <= maxTurns && !slices.Contains(t.turns, T-1) {
			t.turns = append(t.turns, T-1)
		}
	}
	baseScores := scores(methods[base])
	for _, m := range methods {
		ms := scores(m)
		for a := range m.Summary.Mean.Agents {
			row := tableRow{method: m.Name, agent: a, browse: slices.ContainsFunc(m.Replicates, func(r Replicate) bool { return r.Rollouts != "" })}
			for _, d := range t.datasets {
				for _, turn := range t.turns {
					row.cells = append(row.cells, t.cell(m, methods[base], ms, baseScores, d, a, turn, m.Name == t.baseline))
				}
			}
			t.rows = append(t.rows, row)
		}
	}
	return t, nil
}

// accuracyRow returns a method's row of a column's dataset; for the Average, nothing
// where the method lacks one of the table's datasets.
func (t *table1) accuracyRow(s uncertainty.Summary, dataset string, agent, turn int) (uncertainty.Row, bool) {
	if dataset == uncertainty.Average {
		for _, d := range t.datasets[:len(t.datasets)-1] {
			if !slices.Contains(s.Datasets, d) {
				return uncertainty.Row{}, false
			}
		}
	}
	return s.Find(dataset, agent, turn)
}

func (t *table1) cell(m, base Method, ms, bs problemScores, dataset string, agent, turn int, isBase bool) tableCell {
	mean, ok := t.accuracyRow(m.Summary.Mean, dataset, agent, turn)
	if !ok {
		return tableCell{}
	}
	std, _ := t.accuracyRow(m.Summary.Std, dataset, agent, turn)
	c := tableCell{has: true, mean: mean.AccStrict, std: std.AccStrict, seeds: m.Summary.Seeds}
	if isBase {
		return c
	}
	b, ok := t.accuracyRow(base.Summary.Mean, dataset, agent, turn)
	if !ok {
		return c
	}
	c.diff, c.delta = true, mean.AccStrict-b.AccStrict
	datasets := []string{dataset}
	if dataset == uncertainty.Average {
		datasets = t.datasets[:len(t.datasets)-1]
	}
	if diffs := pairedDiffs(ms, bs, datasets, agent, turn); diffs != nil {
		c.ci = true
		c.delta, c.lo, c.hi = bootstrap(diffs)
		for _, d := range diffs {
			c.problems += len(d)
		}
	}
	return c
}

// problemScores[dataset][problem id][seed key][agent][turn] is a problem's strict accuracy.
type problemScores map[string]map[string]map[string][][]float64

func scores(m Method) problemScores {
	out := problemScores{}
	for _, rep := range m.Replicates {
		for _, p := range rep.Problems {
			turns, err := uncertainty.PerProblem(p)
			if err != nil {
				continue // Summarise refused such a record before a method was made
			}
			acc := make([][]float64, len(p.Answers))
			for a := range acc {
				for _, t := range turns {
					acc[a] = append(acc[a], t.AccStrict[a])
				}
			}
			if out[p.Dataset] == nil {
				out[p.Dataset] = map[string]map[string][][]float64{}
			}
			if out[p.Dataset][p.ID] == nil {
				out[p.Dataset][p.ID] = map[string][][]float64{}
			}
			out[p.Dataset][p.ID][rep.Key] = acc
		}
	}
	return out
}

// pairedDiffs returns, per dataset, one difference per problem both methods have: the
// mean over their shared seeds of method minus baseline, or, sharing none, the
// difference of their means over seeds. Nil where a dataset has no shared problem.
func pairedDiffs(m, b problemScores, datasets []string, agent, turn int) [][]float64 {
	var out [][]float64
	for _, d := range datasets {
		var ids []string
		for id := range m[d] {
			if _, ok := b[d][id]; ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		slices.Sort(ids) // a fixed order, so that the bootstrap's draws repeat
		diffs := make([]float64, 0, len(ids))
		for _, id := range ids {
			x, ok := problemDiff(m[d][id], b[d][id], agent, turn)
			if !ok {
				return nil
			}
			diffs = append(diffs, x)
		}
		out = append(out, diffs)
	}
	return out
}

func problemDiff(m, b map[string][][]float64, agent, turn int) (float64, bool) {
	at := func(acc [][]float64) (float64, bool) {
		if agent >= len(acc) || turn >= len(acc[agent]) {
			return 0, false
		}
		return acc[agent][turn], true
	}
	var shared, mSum, bSum float64
	n := 0
	for key, ma := range m {
		if ba, ok := b[key]; ok {
			x, ok1 := at(ma)
			y, ok2 := at(ba)
			if !ok1 || !ok2 {
				return 0, false
			}
			shared += x - y
			n++
		}
	}
	if n > 0 {
		return shared / float64(n), true
	}
	for _, acc := range m {
		x, ok := at(acc)
		if !ok {
			return 0, false
		}
		mSum += x
	}
	for _, acc := range b {
		y, ok := at(acc)
		if !ok {
			return 0, false
		}
		bSum += y
	}
	return mSum/float64(len(m)) - bSum/float64(len(b)), true
}

// bootstrap returns the mean over datasets of the mean difference per problem, and the
// 2.5 and 97.5 percentiles of that statistic when each dataset's problems are resampled
// with replacement (a paired bootstrap, stratified by dataset).
func bootstrap(diffs [][]float64) (estimate, lo, hi float64) {
	stat := func(pick func(d []float64) float64) float64 {
		sum := 0.0
		for _, d := range diffs {
			sum += pick(d)
		}
		return sum / float64(len(diffs))
	}
	mean := func(d []float64) float64 {
		s := 0.0
		for _, x := range d {
			s += x
		}
		return s / float64(len(d))
	}
	estimate = stat(mean)
	rng := rand.New(rand.NewPCG(bootstrapSeed, 0))
	draws := make([]float64, bootstrapResamples)
	for i := range draws {
		draws[i] = stat(func(d []float64) float64 {
			s := 0.0
			for range d {
				s += d[rng.IntN(len(d))]
			}
			return s / float64(len(d))
		})
	}
	slices.Sort(draws)
	return estimate, draws[int(0.025*float64(len(draws)))], draws[int(0.975*float64(len(draws)))-1]
}

// columnLabel names a column as the paper: "math500 T=2".
func (t *table1) columnLabel(i int) string {
	d, turn := t.datasets[i/len(t.turns)], t.turns[i%len(t.turns)]
	if d == uncertainty.Average {
		d = "Average"
	}
	return fmt.Sprintf("%s T=%d", d, turn+1)
}

// withSign prefixes a formatted number that is not negative with "+".
func withSign(s string) string {
	if !strings.HasPrefix(s, "-") {
		return "+" + s
	}
	return s
}

// text formats a cell as "62.4 ± 0.5 (+1.4 [+0.3, +2.6] *)".
func (c tableCell) text() string {
	if !c.has {
		return "–"
	}
	s := cell(c.mean, c.std, c.seeds, percent)
	switch {
	case c.ci:
		s += fmt.Sprintf(" (%s [%s, %s]", withSign(percent(c.delta)), withSign(percent(c.lo)), withSign(percent(c.hi)))
		if c.significant() {
			s += " *"
		}
		s += ")"
	case c.diff:
		s += " (" + withSign(percent(c.delta)) + ")"
	}
	return s
}

const table1Legend = "pass@1 in percent, strict grading (mean ± population standard deviation over seeds); T is the " +
	"paper's turn (turn+1); the Average weighs datasets equally. In parentheses: the difference from %s in " +
	"points, with its 95%% interval from a paired bootstrap over problems (stratified by dataset, each " +
	"problem's difference averaged over the seeds both runs share); * marks an interval that excludes zero. " +
	"A difference without an interval lacks per-problem records on one side (a training run's validation). " +
	"– marks what a method lacks."

func writeTable1Markdown(w io.Writer, t *table1) error {
	var b strings.Builder
	b.WriteString("# Table 1: accuracy per method and agent\n\n")
	fmt.Fprintf(&b, table1Legend+"\n\n", t.baseline)
	header := []string{"Method", "Agent"}
	for i := range len(t.datasets) * len(t.turns) {
		header = append(header, t.columnLabel(i))
	}
	var rows [][]string
	for _, r := range t.rows {
		row := []string{r.method, agentLabel(r.agent)}
		for _, c := range r.cells {
			row = append(row, c.text())
		}
		rows = append(rows, row)
	}
	markdownTable(&b, header, rows)
	b.WriteString("Files: table1.csv (every cell with its interval), table1.html (the paper's colours).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTable1CSV(w io.Writer, t *table1) error {
	records := [][]string{{"method", "agent", "dataset", "T", "seeds", "acc", "acc_std", "diff", "ci_low", "ci_high", "excludes_zero", "paired_problems"}}
	for _, r := range t.rows {
		for i, c := range r.cells {
			if !c.has {
				continue
			}
			rec := []string{r.method, agentName(r.agent), t.datasets[i/len(t.turns)], strconv.Itoa(t.turns[i%len(t.turns)] + 1),
				strconv.Itoa(c.seeds), num(c.mean), num(c.std), "", "", "", "", ""}
			if c.diff {
				rec[7] = num(c.delta)
			}
			if c.ci {
				rec[8], rec[9], rec[10], rec[11] = num(c.lo), num(c.hi), strconv.FormatBool(c.significant()), strconv.Itoa(c.problems)
			}
			records = append(records, rec)
		}
	}
	return writeCSV(w, records)
}

// The paper's colours (MBlue, MPink, MGray in its preamble).
const (
	gainColour = "A4C2E6"
	lossColour = "E8C2C0"
	baseColour = "F4F5F7"
)

// tint mixes a colour with white as LaTeX's colour!pct does.
func tint(hex string, pct int) string {
	v, _ := strconv.ParseUint(hex, 16, 32)
	out := "#"
	for shift := 16; shift >= 0; shift -= 8 {
		c := int(v>>shift) & 0xff
		out += fmt.Sprintf("%02x", 255-(255-c)*pct/100)
	}
	return out
}

// background is a cell's colour: the baseline's grey, or blue for a gain and pink for a
// loss, deeper with the difference (5% of the colour per point, from 10% to 75%).
func (c tableCell) background(isBase bool) string {
	switch {
	case !c.has:
		return ""
	case isBase:
		return tint(baseColour, 100)
	case !c.diff || c.delta == 0:
		return ""
	}
	pct := min(75, max(10, int(5*100*math.Abs(c.delta))))
	if c.delta > 0 {
		return tint(gainColour, pct)
	}
	return tint(lossColour, pct)
}

func writeTable1HTML(w io.Writer, t *table1) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Table 1</title>\n<style>\n" +
		"body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}" +
		"th,td{border:1px solid #ccc;padding:4px 6px;text-align:center;white-space:nowrap}" +
		".sig{font-weight:bold}caption{caption-side:bottom;text-align:left;max-width:60em;padding-top:1em}\n" +
		"</style>\n</head>\n<body>\n<table>\n")
	fmt.Fprintf(&b, "<caption>%s Light blue <span style=\"background:%s\">+ gain</span>, light pink "+
		"<span style=\"background:%s\">− loss</span>, grey the baseline.</caption>\n",
		html.EscapeString(fmt.Sprintf(table1Legend, t.baseline)), tint(gainColour, 25), tint(lossColour, 25))
	b.WriteString("<tr><th rowspan=\"2\">Method</th><th rowspan=\"2\">Agent</th>")
	for _, d := range t.datasets {
		if d == uncertainty.Average {
			d = "Average"
		}
		fmt.Fprintf(&b, "<th colspan=\"%d\">%s</th>", len(t.turns), html.EscapeString(d))
	}
	b.WriteString("</tr>\n<tr>")
	for range t.datasets {
		for _, turn := range t.turns {
			fmt.Fprintf(&b, "<th>T=%d</th>", turn+1)
		}
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		fmt.Fprintf(&b, "<tr><th>%s</th><th>%s</th>", html.EscapeString(r.method), agentLabel(r.agent))
		for i, c := range r.cells {
			style := ""
			if bg := c.background(r.method == t.baseline); bg != "" {
				style = fmt.Sprintf(" style=\"background:%s\"", bg)
			}
			class := ""
			if c.significant() {
				class = " class=\"sig\""
			}
			text := html.EscapeString(c.text())
			if r.browse && c.has {
				text = fmt.Sprintf("<a href=\"%s\">%s</a>", html.EscapeString(browserLink(r.method, t.datasets[i/len(t.turns)])), text)
			}
			fmt.Fprintf(&b, "<td%s%s>%s</td>", style, class, text)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// TrainingMethod is a training run's last summarised validation as a method named name
// (one seed, no problem records), with its first and last as a base/trained pair where
// they differ; ok is false where no validation has a summary.
func TrainingMethod(dir, name string) (m Method, pair *Pair, ok bool, err error) {
	_, val, err := trainlog.Read(filepath.Join(dir, trainlog.File))
	if err != nil {
		return Method{}, nil, false, fmt.Errorf("training run %s: %w", dir, err)
	}
	var sums []trainlog.ValMetrics
	for _, v := range val {
		if v.Summary != nil {
			sums = append(sums, v)
		}
	}
	if len(sums) == 0 {
		return Method{}, nil, false, nil
	}
	first, last := sums[0], sums[len(sums)-1]
	c, err := uncertainty.CombineSeeds([]uncertainty.Summary{*last.Summary})
	if err != nil {
		return Method{}, nil, false, fmt.Errorf("training run %s: %w", dir, err)
	}
	if first.Step != last.Step {
		pair = &Pair{Name: fmt.Sprintf("%s (step %d → %d)", name, first.Step, last.Step), Base: *first.Summary, Trained: *last.Summary}
	}
	return Method{Name: name, Summary: c}, pair, true, nil
}
