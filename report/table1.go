package report

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
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
	// Setting names the agent set the method debates ("" where none is known); by default
	// each row is compared with the first method of its setting.
	Setting string
	// Partial says which of its runs left problems unfinished ("" for none).
	Partial string
}

// NewMethod merges runs into one method named name. A seed's runs on different data sets
// make one seed of the method (the paper runs AIME apart, with its own lengths), so the
// Average is taken per seed, then over seeds; a seed that two runs give on one data set
// counts twice and pairs with no other method's seed.
func NewMethod(name string, runs []Run) (Method, error) {
	m := Method{Name: name}
	var partial []string
	for _, r := range runs {
		if r.Partial != "" {
			partial = append(partial, r.Name+": "+r.Partial)
		}
	}
	m.Partial = strings.Join(partial, "; ")
	if len(runs) == 1 {
		m.Summary, m.Replicates = runs[0].Summary, runs[0].Replicates
		return m, nil
	}
	var err error
	if m.Replicates, err = mergeSeeds(name, runs); err != nil {
		return Method{}, err
	}
	var seeds []uncertainty.Summary
	for _, rep := range m.Replicates {
		s, err := uncertainty.Summarise(rep.Problems)
		if err != nil {
			return Method{}, fmt.Errorf("method %s: seed %s: %w", name, rep.Key, err)
		}
		if len(seeds) > 0 && !slices.Equal(s.Datasets, seeds[0].Datasets) {
			return Method{}, fmt.Errorf("method %s: seed %s covers the data sets %v, seed %s covers %v; debate every data set under every seed",
				name, rep.Key, s.Datasets, m.Replicates[0].Key, seeds[0].Datasets)
		}
		seeds = append(seeds, s)
	}
	if m.Summary, err = uncertainty.CombineSeeds(seeds); err != nil {
		return Method{}, fmt.Errorf("method %s: %w", name, err)
	}
	return m, nil
}

// mergeSeeds joins the runs' replicates of one seed key while their data sets are
// disjoint, in run order: the runs of one training on several data sets make one seed, and
// another training's runs (train_seeds) another. Where a key makes several, each is told
// apart by its number and pairs with no other method's seed.
func mergeSeeds(name string, runs []Run) ([]Replicate, error) {
	type group struct {
		rep      Replicate
		datasets []string
	}
	byKey := map[string][]*group{}
	var order []string
	for _, r := range runs {
		if len(r.Replicates) == 0 {
			return nil, fmt.Errorf("method %s: run %s has no problem records to merge", name, r.Name)
		}
		for _, rep := range r.Replicates {
			if byKey[rep.Key] == nil {
				order = append(order, rep.Key)
			}
			ds := problemDatasets(rep.Problems)
			i := slices.IndexFunc(byKey[rep.Key], func(g *group) bool {
				return !slices.ContainsFunc(ds, func(d string) bool { return slices.Contains(g.datasets, d) })
			})
			if i < 0 {
				byKey[rep.Key] = append(byKey[rep.Key], &group{rep: Replicate{Key: rep.Key}})
				i = len(byKey[rep.Key]) - 1
			}
			g := byKey[rep.Key][i]
			g.rep.Problems = append(g.rep.Problems, rep.Problems...)
			g.datasets = append(g.datasets, ds...)
		}
	}
	var out []Replicate
	for _, key := range order {
		groups := byKey[key]
		for i, g := range groups {
			if len(groups) > 1 {
				g.rep.Key = fmt.Sprintf("%s (%d of %d)", key, i+1, len(groups))
			}
			out = append(out, g.rep)
		}
	}
	return out, nil
}

// problemDatasets lists the data sets of records, in first appearance.
func problemDatasets(recs []uncertainty.ProblemRecord) []string {
	var ds []string
	for _, p := range recs {
		if !slices.Contains(ds, p.Dataset) {
			ds = append(ds, p.Dataset)
		}
	}
	return ds
}

// TableOptions choose Table 1's baseline row and turns.
type TableOptions struct {
	// Baseline names the method every cell is compared with; "" is, for each method, the
	// first method of its Setting.
	Baseline string
	// Turns are the paper's T (turn+1); none means T = 1, 2 and the longest debate's last.
	Turns []int
	// Spread says what the ± spans, for the caption ("" is "seeds").
	Spread string
}

// table1 is Table 1's content: one row per method and agent, one column per dataset
// (then the Average) and T.
type table1 struct {
	baseline string // the legend's words for the baseline rows
	spread   string
	datasets []string // the columns' datasets, uncertainty.Average last
	turns    []int    // 0-based
	rows     []tableRow
	partial  []string // the partial methods, with what they lack
}

type tableRow struct {
	method string
	agent  int
	isBase bool        // the row is its own baseline
	cells  []tableCell // datasets x turns, dataset-major
	browse bool        // the method's problems are in the browser beside the table (browserLink)
}

// tableCell is one accuracy (mean and std over seeds) and its difference from the
// baseline's; has says the method has the cell, diff whether the baseline has it too.
type tableCell struct {
	has, diff, ci bool
	mean, std     float64
	seeds         int
	n             int     // problems the accuracy averages (the Average: over its datasets)
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
	bases, err := Baselines(methods, opt.Baseline)
	if err != nil {
		return nil, err
	}
	t := &table1{spread: cmp.Or(opt.Spread, "seeds"), baseline: baselineText(methods, bases)}
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
	for i, m := range methods {
		base := methods[bases[i]]
		ms, bs := scores(m), scores(base)
		if m.Partial != "" {
			t.partial = append(t.partial, fmt.Sprintf("%s (%s)", m.Name, m.Partial))
		}
		for a := range m.Summary.Mean.Agents {
			row := tableRow{method: m.Name, agent: a, isBase: bases[i] == i,
				browse: slices.ContainsFunc(m.Replicates, func(r Replicate) bool { return r.Rollouts != "" })}
			for _, d := range t.datasets {
				for _, turn := range t.turns {
					row.cells = append(row.cells, t.cell(m, base, ms, bs, d, a, turn, row.isBase))
				}
			}
			t.rows = append(t.rows, row)
		}
	}
	return t, nil
}

// Baselines gives each method's baseline: the one named, or the first method of its
// setting (the zero-shot debate of its agent set, as the paper colours each setting).
func Baselines(methods []Method, named string) ([]int, error) {
	bases := make([]int, len(methods))
	if named != "" {
		base := slices.IndexFunc(methods, func(m Method) bool { return m.Name == named })
		if base < 0 {
			names := make([]string, len(methods))
			for i, m := range methods {
				names[i] = m.Name
			}
			return nil, fmt.Errorf("table 1: no method named %q (methods: %s)", named, strings.Join(names, ", "))
		}
		for i := range bases {
			bases[i] = base
		}
		return bases, nil
	}
	for i, m := range methods {
		bases[i] = slices.IndexFunc(methods, func(b Method) bool { return b.Setting == m.Setting })
	}
	return bases, nil
}

// baselineText names the baselines for the legend: one method, or each setting's.
func baselineText(methods []Method, bases []int) string {
	var names []string
	for _, b := range bases {
		if !slices.Contains(names, methods[b].Name) {
			names = append(names, methods[b].Name)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return "the first method of the row's agent set (" + strings.Join(names, ", ") + ")"
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
	c := tableCell{has: true, mean: mean.AccStrict, std: std.AccStrict, seeds: m.Summary.Seeds, n: mean.Problems}
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
