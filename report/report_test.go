package report

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/uncertainty"
)

func right(key string) grade.Verdict {
	return grade.Verdict{Key: key, Strict: true, Robust: true, Tokens: 100, Boxed: true, MeanEntropy: 0.4, MeanNLL: 0.3}
}
func wrong(key string) grade.Verdict {
	return grade.Verdict{Key: key, Tokens: 300, Truncated: true, MeanEntropy: 0.9, MeanNLL: 0.8}
}

// records builds problems of two datasets, two agents and turns turns (K = 2). Agent 0
// starts half right and is right from turn 1 on; agent 1 is wrong at turn 0 and right
// after; with flip set, agent 0's first trajectory is wrong at turn 1 instead.
func records(turns int, flip bool) []uncertainty.ProblemRecord {
	var out []uncertainty.ProblemRecord
	for _, d := range []string{"gsm8k", "math"} {
		p := uncertainty.ProblemRecord{Dataset: d, ID: d + "-1", Answers: make([][][]grade.Verdict, 2)}
		for t := range turns {
			a0 := []grade.Verdict{right("1"), right("1")}
			a1 := []grade.Verdict{right("1"), right("1")}
			if t == 0 {
				a0[1] = wrong("2")
				a1 = []grade.Verdict{wrong("3"), wrong("3")}
			}
			if t == 1 && flip {
				a0[0] = wrong("4")
			}
			p.Answers[0] = append(p.Answers[0], a0)
			p.Answers[1] = append(p.Answers[1], a1)
		}
		out = append(out, p)
	}
	return out
}

func combined(t *testing.T, turns int, seeds ...bool) uncertainty.Combined {
	t.Helper()
	var runs []uncertainty.Summary
	for _, flip := range seeds {
		s, err := uncertainty.Summarise(records(turns, flip))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, s)
	}
	c, err := uncertainty.CombineSeeds(runs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return records
}

// line returns the record whose leading fields equal key, for a header-named column.
func field(t *testing.T, records [][]string, column string, key ...string) string {
	t.Helper()
	col := -1
	for i, h := range records[0] {
		if h == column {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("no column %q in %v", column, records[0])
	}
	for _, r := range records[1:] {
		if reflect.DeepEqual(r[:len(key)], key) {
			return r[col]
		}
	}
	t.Fatalf("no line %v", key)
	return ""
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	run := Run{Name: "zero-shot", Summary: combined(t, 3, false, true), Problems: records(3, false)}
	if err := Write(dir, run); err != nil {
		t.Fatal(err)
	}

	t.Run("summary.json reads back as written", func(t *testing.T) {
		got, err := ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != run.Name || !reflect.DeepEqual(got.Summary, run.Summary) {
			t.Errorf("read back %q, summary equal: %v", got.Name, reflect.DeepEqual(got.Summary, run.Summary))
		}
	})

	t.Run("accuracy.csv holds each row with its deviation", func(t *testing.T) {
		acc := readCSV(t, filepath.Join(dir, AccuracyFile))
		if len(acc) != 1+len(run.Summary.Mean.Rows) {
			t.Fatalf("%d lines, want %d", len(acc), 1+len(run.Summary.Mean.Rows))
		}
		// Agent 0 at turn 1: right in both trajectories with one seed, in one with the
		// other: mean 0.75, population std 0.25.
		for column, want := range map[string]string{"acc_strict": "0.75", "acc_strict_std": "0.25", "maj_robust": "0.75", "problems": "1"} {
			if got := field(t, acc, column, "gsm8k", "0", "1"); got != want {
				t.Errorf("gsm8k agent 0 turn 1 %s = %s, want %s", column, got, want)
			}
		}
		if got := field(t, acc, "acc_robust", "average", "system", "0"); got != "0.25" {
			t.Errorf("team turn 0 robust accuracy %s, want 0.25", got)
		}
	})

	t.Run("uncertainty.csv holds the team decomposition", func(t *testing.T) {
		unc := readCSV(t, filepath.Join(dir, UncertaintyFile))
		// Turn 2: both agents certain of "1": no uncertainty left.
		if got := field(t, unc, "tu", "math", "system", "2"); got != "0" {
			t.Errorf("team TU at turn 2 = %s, want 0", got)
		}
		if got := field(t, unc, "tokens", "math", "1", "0"); got != "300" {
			t.Errorf("agent 1 tokens at turn 0 = %s, want 300", got)
		}
	})

	t.Run("flips.csv has both transitions of later turns in both modes", func(t *testing.T) {
		flips := readCSV(t, filepath.Join(dir, FlipsFile))
		// 3 datasets (with the average) x 3 agents (with the team) x (1 + 2) transitions x 2 modes.
		if len(flips) != 1+3*3*3*2 {
			t.Errorf("%d lines, want %d", len(flips), 1+3*3*3*2)
		}
		// Agent 1 goes from all wrong to all right.
		if got := field(t, flips, "w2c", "gsm8k", "1", "0", "2", "strict"); got != "1" {
			t.Errorf("agent 1 0->2 W2C %s, want 1", got)
		}
	})

	t.Run("problems.csv has a line per problem and turn", func(t *testing.T) {
		problems := readCSV(t, filepath.Join(dir, ProblemsFile))
		if len(problems) != 1+2*3 {
			t.Errorf("%d lines, want 7", len(problems))
		}
		if got := field(t, problems, "acc_strict_0", "gsm8k", "gsm8k-1", "0"); got != "0.5" {
			t.Errorf("agent 0 turn 0 accuracy %s, want 0.5", got)
		}
	})

	t.Run("report.md has the paper-style tables", func(t *testing.T) {
		md, err := os.ReadFile(filepath.Join(dir, ReportFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"# Debate evaluation: zero-shot",
			"| Turn | gsm8k A0 | gsm8k A1 | math A0 | math A1 | average A0 | average A1 |",
			"| 0 (T=1) | 50.0 ± 0.0 | 0.0 ± 0.0 |",
			"| 1 (T=2) | 75.0 ± 25.0 | 100.0 ± 0.0 |",
			"![Accuracy per turn, average](accuracy.png)",
			"| gsm8k | A1 | 0→1 | 0.0 ± 0.0 | 0.0 ± 0.0 | 100.0 ± 0.0 | 0.0 ± 0.0 | 100.0 ± 0.0 |",
			"| average | Team | 0→2 | 25.0 ± 0.0 | 0.0 ± 0.0 | 75.0 ± 0.0 | 0.0 ± 0.0 | 75.0 ± 0.0 |",
		} {
			if !strings.Contains(string(md), want) {
				t.Errorf("report.md lacks %q", want)
			}
		}
		// Only transitions from turn 0 go into the Markdown; the rest stay in flips.csv.
		if strings.Contains(string(md), "| gsm8k | A0 | 1→2 |") {
			t.Error("report.md lists the 1→2 transition")
		}
	})

	t.Run("figures are valid SVG and PNG", func(t *testing.T) {
		for _, name := range []string{"accuracy", "uncertainty", "flips"} {
			checkFigure(t, dir, name, 900, 550) // 16 x 10 cm at 150 dpi: about 945x591
		}
	})

	t.Run("no temporary files are left", func(t *testing.T) { noTempFiles(t, dir) })
}

func TestWriteSingleTurnSingleSeed(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Run{Name: "t0", Summary: combined(t, 1, false)}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	// One seed: no deviations; one turn: no flips, no flips figure, no problems.csv.
	if strings.Contains(string(md), "±") || strings.Contains(string(md), "## Flips") {
		t.Errorf("report.md shows deviations or flips:\n%s", md)
	}
	for _, name := range []string{"flips.png", ProblemsFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s: want it absent, stat says %v", name, err)
		}
	}
}

// report.md says when a verifier model's verdicts are in the robust figures, and how
// many samples it decided; a run without one says nothing of it.
func TestWriteVerified(t *testing.T) {
	answers := func(v grade.Check) [][][]grade.Verdict {
		return [][][]grade.Verdict{{{{Key: "three", Verifier: v}, {Key: "3", Robust: true}}}}
	}
	for _, c := range []struct {
		check grade.Check
		want  string
	}{
		{grade.CheckEqual, "Share of the samples it decided (d): turn 0 (T=1) 50.0%."},
		{"", ""},
	} {
		s, err := uncertainty.Summarise([]uncertainty.ProblemRecord{{Dataset: "d", ID: "x", Answers: answers(c.check)}})
		if err != nil {
			t.Fatal(err)
		}
		run, err := uncertainty.CombineSeeds([]uncertainty.Summary{s})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := Write(dir, Run{Name: "v", Summary: run}); err != nil {
			t.Fatal(err)
		}
		md, _ := os.ReadFile(filepath.Join(dir, ReportFile))
		if said := strings.Contains(string(md), "verifier model"); said != (c.want != "") || !strings.Contains(string(md), c.want) {
			t.Errorf("verifier %q: report.md\n%s\nwant %q", c.check, md, c.want)
		}
	}
}

func TestWriteAndReadErrors(t *testing.T) {
	if err := Write(t.TempDir(), Run{Name: "empty"}); err == nil {
		t.Error("Write of an empty summary: want an error")
	}
	if _, err := ReadRun(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadRun of a missing directory: want an error")
	}
	for name, content := range map[string]string{
		"malformed JSON":       "{",
		"another entropy unit": `{"name":"x","entropy_unit":"bits","seeds":1,"mean":{"rows":[{}]},"std":{"rows":[{}]}}`,
		"no rows":              `{"name":"x","entropy_unit":"nats","seeds":1}`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRun(dir); err == nil {
			t.Errorf("ReadRun of %s: want an error", name)
		}
	}
	if err := WriteComparison(t.TempDir(), nil); err == nil {
		t.Error("WriteComparison of no runs: want an error")
	}
}

func TestWriteComparison(t *testing.T) {
	dir := t.TempDir()
	runs := []Run{
		{Name: "zero-shot", Summary: combined(t, 3, false)},
		{Name: "umad", Protocol: "probe (one debate)", Summary: combined(t, 2, true, false)},
	}
	if err := WriteComparison(dir, runs); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Debate evaluation: zero-shot vs umad",
		"| Turn | zero-shot gsm8k A0 | zero-shot gsm8k A1 | umad gsm8k A0 | umad gsm8k A1 |",
		"| 1 (T=2) | 100.0 | 100.0 | 75.0 ± 25.0 | 100.0 ± 0.0 |",
		// umad has no turn 2.
		"| 2 (T=3) | 100.0 | 100.0 | – | – |",
		"| Turn | zero-shot | umad |",
		"- umad: protocol probe (one debate).",
		"](compare-uncertainty.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("compare.md lacks %q", want)
		}
	}
	for _, ext := range []string{".svg", ".png"} {
		if fi, err := os.Stat(filepath.Join(dir, CompareFigure+ext)); err != nil || fi.Size() == 0 {
			t.Errorf("no comparison figure %s%s: %v", CompareFigure, ext, err)
		}
	}
	rows := readCSV(t, filepath.Join(dir, CompareCSVFile))
	want := 1 + len(runs[0].Summary.Mean.Rows) + len(runs[1].Summary.Mean.Rows)
	if len(rows) != want {
		t.Errorf("compare.csv has %d lines, want %d", len(rows), want)
	}
	if got := field(t, rows, "acc_strict", "umad", "2", "gsm8k", "0", "1"); got != "0.75" {
		t.Errorf("umad agent 0 turn 1 accuracy %s, want 0.75", got)
	}
}

// noTempFiles fails if dir holds a hidden (temporary) file.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left over: %s", e.Name())
		}
	}
}

// checkFigure fails unless dir holds name.svg with an svg element and name.png decoding
// to at least minW x minH pixels.
func checkFigure(t *testing.T, dir, name string, minW, minH int) {
	t.Helper()
	svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
	if err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("%s.svg: %v, svg element found: %v", name, err, bytes.Contains(svg, []byte("<svg")))
	}
	f, err := os.Open(filepath.Join(dir, name+".png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s.png: %v", name, err)
	}
	if b := img.Bounds(); b.Dx() < minW || b.Dy() < minH {
		t.Errorf("%s.png is %dx%d, want at least %dx%d", name, b.Dx(), b.Dy(), minW, minH)
	}
}

// A data set or run name is text in the Markdown reports, as in the HTML and SVG ones: its
// HTML is escaped, its | does not split a table cell and its newline does not end a row.
func TestMarkdownEscapesNames(t *testing.T) {
	const evil = "<script>x</script>|y\nz"
	recs := records(2, false)
	for i := range recs {
		if recs[i].Dataset == "gsm8k" {
			recs[i].Dataset = evil
		}
	}
	s, err := uncertainty.Summarise(recs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := uncertainty.CombineSeeds([]uncertainty.Summary{s})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, Run{Name: "a|b", Summary: c, Problems: recs}); err != nil {
		t.Fatal(err)
	}
	if err := WriteComparison(dir, []Run{{Name: "a|b", Summary: c}, {Name: "<i>c", Summary: c}}); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{ReportFile, CompareFile} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		if strings.Contains(md, "<script>") || strings.Contains(md, "<i>") || strings.Contains(md, "|y\nz") {
			t.Errorf("%s carries a raw name:\n%s", file, md)
		}
		if !strings.Contains(md, `&lt;script&gt;x&lt;/script&gt;\|y z`) {
			t.Errorf("%s lacks the escaped data set name:\n%s", file, md)
		}
		// Every row of a table has its header's cells.
		cols := -1
		for _, line := range strings.Split(md, "\n") {
			if !strings.HasPrefix(line, "|") {
				cols = -1
				continue
			}
			n := strings.Count(line, "|") - strings.Count(line, `\|`)
			if cols < 0 {
				cols = n
			} else if n != cols {
				t.Errorf("%s: a row with %d cell separators under a header of %d: %s", file, n, cols, line)
			}
		}
	}
}
