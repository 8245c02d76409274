package report

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/uncertainty"
)

// onDataset keeps the records of one dataset.
func onDataset(recs []uncertainty.ProblemRecord, d string) []uncertainty.ProblemRecord {
	var out []uncertainty.ProblemRecord
	for _, r := range recs {
		if r.Dataset == d {
			out = append(out, r)
		}
	}
	return out
}

// Runs of one label on different datasets (the paper runs AIME apart) merge per seed, then
// over seeds: the Average is each seed's equal-weight mean over datasets, then mean ± std.
// Seed 1 is right on every gsm8k problem and none of math (Average 50), seed 2 on half of
// each (Average 50 too); a per-run merge would have refused the runs or left the Average out.
func TestMethodAcrossDatasets(t *testing.T) {
	all := func(i, a, turn int) bool { return true }
	none := func(i, a, turn int) bool { return false }
	half := func(i, a, turn int) bool { return i%2 == 0 }
	gsm1 := debateRun(t, "gsm8k-seed-1", onDataset(debateRecords(8, 1, all), "gsm8k"), "1")
	gsm2 := debateRun(t, "gsm8k-seed-2", onDataset(debateRecords(8, 1, half), "gsm8k"), "2")
	// math has other problems (4), as AIME has other lengths.
	math1 := debateRun(t, "math-seed-1", onDataset(debateRecords(4, 1, none), "math"), "1")
	math2 := debateRun(t, "math-seed-2", onDataset(debateRecords(4, 1, half), "math"), "2")
	m, err := NewMethod("zero-shot", []Run{gsm1, math1, gsm2, math2})
	if err != nil {
		t.Fatal(err)
	}
	if m.Summary.Seeds != 2 || len(m.Replicates) != 2 {
		t.Fatalf("%d seeds, %d replicates, want 2 of each", m.Summary.Seeds, len(m.Replicates))
	}
	for _, c := range []struct {
		dataset    string
		mean, std  float64
		problems   int
		summaryStd uncertainty.Summary
	}{{"gsm8k", 0.75, 0.25, 8, m.Summary.Std}, {"math", 0.25, 0.25, 4, m.Summary.Std}, {uncertainty.Average, 0.5, 0, 12, m.Summary.Std}} {
		mean, ok := m.Summary.Mean.Find(c.dataset, 0, 0)
		std, _ := c.summaryStd.Find(c.dataset, 0, 0)
		if !ok || math.Abs(mean.AccStrict-c.mean) > 1e-12 || math.Abs(std.AccStrict-c.std) > 1e-12 || mean.Problems != c.problems {
			t.Errorf("%s: %v %.3f ± %.3f over %d problems, want %.3f ± %.3f over %d", c.dataset, ok, mean.AccStrict, std.AccStrict, mean.Problems, c.mean, c.std, c.problems)
		}
	}
	trained, err := NewMethod("umad", []Run{
		debateRun(t, "u-gsm8k", onDataset(debateRecords(8, 1, all), "gsm8k"), "1", "2"),
		debateRun(t, "u-math", onDataset(debateRecords(4, 1, all), "math"), "1", "2")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteTable1(dir, []Method{m, trained}, TableOptions{Spread: "2 evaluation seeds of one training"}); err != nil {
		t.Fatal(err)
	}
	md := readFile(t, filepath.Join(dir, Table1File))
	for _, want := range []string{
		"| Method | Agent | gsm8k T=1 | math T=1 | Average T=1 |",
		"| zero-shot | A0 | 75.0 ± 25.0 | 25.0 ± 25.0 | 50.0 ± 0.0 |",
		"| umad | A0 | 100.0 ± 0.0 (+25.0 [+",
		"over 2 evaluation seeds of one training",
		"Problems per dataset (n): gsm8k 8, math 4.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table1.md lacks %q\n%s", want, md)
		}
	}
	// Two trainings (train_seeds) debated under seed 1 on both data sets: two seeds of the
	// method, each with both data sets and their Average.
	both, err := NewMethod("umad", []Run{
		debateRun(t, "t7-gsm8k", onDataset(debateRecords(8, 1, all), "gsm8k"), "1"),
		debateRun(t, "t7-math", onDataset(debateRecords(4, 1, none), "math"), "1"),
		debateRun(t, "t8-gsm8k", onDataset(debateRecords(8, 1, half), "gsm8k"), "1"),
		debateRun(t, "t8-math", onDataset(debateRecords(4, 1, half), "math"), "1")})
	if err != nil {
		t.Fatal(err)
	}
	if avg, ok := both.Summary.Mean.Find(uncertainty.Average, 0, 0); both.Summary.Seeds != 2 || !ok || avg.AccStrict != 0.5 {
		t.Errorf("two trainings under seed 1: %d seeds, Average %v %.3f; want 2 seeds, 0.5", both.Summary.Seeds, ok, avg.AccStrict)
	}
	// A seed that lacks a dataset is refused, naming both seeds' datasets.
	if _, err := NewMethod("zero-shot", []Run{gsm1, math1, gsm2}); err == nil || !strings.Contains(err.Error(), "seed 2 covers the data sets [gsm8k]") {
		t.Errorf("a seed without math: %v", err)
	}
}

// By default each agent set's rows are compared with that set's first method (its
// zero-shot debate); --baseline still names one for every row. A method over other problems
// says its n in its cells, and a partial one is marked.
func TestTable1Baselines(t *testing.T) {
	low := func(i, a, turn int) bool { return i%4 == 0 }
	mid := func(i, a, turn int) bool { return i%2 == 0 }
	high := func(i, a, turn int) bool { return i%4 != 3 }
	method := func(name, setting string, n int, correct func(i, a, turn int) bool) Method {
		m, err := NewMethod(name, []Run{debateRun(t, name, debateRecords(n, 1, correct), "1", "2")})
		if err != nil {
			t.Fatal(err)
		}
		m.Setting = setting
		return m
	}
	methods := []Method{
		method("zero-shot/hetero", "hetero", 8, mid), method("zero-shot/homo", "homo", 8, low),
		method("umad/hetero", "hetero", 8, high), method("umad/homo", "homo", 4, mid)}
	methods[3].Partial = "seed 1: 4 of 8 problems finished"
	dir := t.TempDir()
	if err := WriteTable1(dir, methods, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	md := readFile(t, filepath.Join(dir, Table1File))
	for _, want := range []string{
		"| umad/hetero | A0 | 75.0 ± 0.0 (+25.0 [+",
		"| umad/homo (partial) | A0 | 50.0 ± 0.0 [n=4] (+25.0 [+",
		"the first method of the row's agent set (zero-shot/hetero, zero-shot/homo)",
		"PARTIAL, problems left unfinished: umad/homo (seed 1: 4 of 8 problems finished)",
		"[n=…] marks a cell over other problems",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table1.md lacks %q\n%s", want, md)
		}
	}
	page := readFile(t, filepath.Join(dir, Table1HTMLFile))
	if strings.Count(page, "background:#f4f5f7") != 2*2*3 { // two baselines, two agents, 3 columns
		t.Errorf("%d grey baseline cells, want 12", strings.Count(page, "background:#f4f5f7"))
	}
	rows := readCSV(t, filepath.Join(dir, Table1CSVFile))
	if got := field(t, rows, "problems", "umad/homo", "0", "gsm8k", "1"); got != "4" {
		t.Errorf("umad/homo gsm8k n = %s, want 4", got)
	}
	if err := WriteTable1(dir, methods, TableOptions{Baseline: "zero-shot/homo"}); err != nil {
		t.Fatal(err)
	}
	md = readFile(t, filepath.Join(dir, Table1File))
	if !strings.Contains(md, "| umad/hetero | A0 | 75.0 ± 0.0 (+50.0 [+") || !strings.Contains(md, "difference from zero-shot/homo in points") {
		t.Errorf("--baseline zero-shot/homo:\n%s", md)
	}
}

// compare.md states each run's problem count per dataset and warns where they differ (a run
// of 1 problem against one of 8), and marks a partial run; so does its report.md.
func TestComparisonProblemCounts(t *testing.T) {
	mid := func(i, a, turn int) bool { return i%2 == 0 }
	full := debateRun(t, "full", debateRecords(8, 2, mid), "1")
	cut := debateRun(t, "cut", debateRecords(1, 2, mid), "1")
	cut.Partial = "seed 1: 1 of 8 problems finished"
	dir := t.TempDir()
	if err := WriteComparison(dir, []Run{full, cut}); err != nil {
		t.Fatal(err)
	}
	md := readFile(t, filepath.Join(dir, CompareFile))
	for _, want := range []string{
		"- cut: PARTIAL, seed 1: 1 of 8 problems finished.",
		"## gsm8k\n\nProblems (n): full 8, cut 1. The runs differ in their problems",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("compare.md lacks %q\n%s", want, md)
		}
	}
	if err := WriteComparison(dir, []Run{full, full}); err != nil {
		t.Fatal(err)
	}
	if md := readFile(t, filepath.Join(dir, CompareFile)); strings.Contains(md, "differ in their problems") || !strings.Contains(md, "Problems (n): full 8, full 8.") {
		t.Errorf("equal runs:\n%s", md)
	}
	if err := Write(dir, cut); err != nil {
		t.Fatal(err)
	}
	if md := readFile(t, filepath.Join(dir, ReportFile)); !strings.Contains(md, "**PARTIAL RUN**: seed 1: 1 of 8 problems finished;") {
		t.Errorf("report.md of a partial run:\n%s", md)
	}
}
