package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/uncertainty"
)

// debateRecords builds n problems per dataset (gsm8k, math) of two agents and turns
// turns, K = 2, each sample right where correct says so.
func debateRecords(n, turns int, correct func(i, agent, turn int) bool) []uncertainty.ProblemRecord {
	var out []uncertainty.ProblemRecord
	for _, d := range []string{"gsm8k", "math"} {
		for i := range n {
			p := uncertainty.ProblemRecord{Dataset: d, ID: fmt.Sprintf("%s-%d", d, i), Answers: make([][][]grade.Verdict, 2)}
			for a := range 2 {
				for t := range turns {
					v := wrong("9")
					if correct(i, a, t) {
						v = right("1")
					}
					p.Answers[a] = append(p.Answers[a], []grade.Verdict{v, v})
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// debateRun is a run whose seeds all hold recs.
func debateRun(t *testing.T, name string, recs []uncertainty.ProblemRecord, seeds ...string) Run {
	t.Helper()
	r := Run{Name: name}
	var sums []uncertainty.Summary
	for _, s := range seeds {
		sum, err := uncertainty.Summarise(recs)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
		r.Replicates = append(r.Replicates, Replicate{Key: s, Problems: recs})
	}
	var err error
	if r.Summary, err = uncertainty.CombineSeeds(sums); err != nil {
		t.Fatal(err)
	}
	return r
}

// The baseline's agent 0 is right on even problems, agent 1 on every third; the trained
// method's agent 0 is also right on odd problems from T=2 on: +50 points, an interval
// clear of zero; its agent 1 is the baseline's: +0.0, interval [0, 0], no marker.
func TestWriteTable1(t *testing.T) {
	baseline := func(i, a, _ int) bool { return (a == 0 && i%2 == 0) || (a == 1 && i%3 == 0) }
	trained := func(i, a, turn int) bool { return baseline(i, a, turn) || (a == 0 && turn > 0) }
	zero := debateRun(t, "zero-shot", debateRecords(12, 3, baseline), "1", "2")
	umad := debateRun(t, "umad-debate", debateRecords(12, 3, trained), "1", "2")
	// Two runs under one label, both seed 1: merged as two seeds, paired with no baseline seed.
	split1 := debateRun(t, "ippo-s1", debateRecords(12, 3, trained), "1")
	split2 := debateRun(t, "ippo-s2", debateRecords(12, 3, baseline), "1")
	ippo, err := NewMethod("IPPO", []Run{split1, split2})
	if err != nil {
		t.Fatal(err)
	}
	// A training run's validation: a summary without problem records.
	val, err := uncertainty.Summarise(debateRecords(12, 2, trained))
	if err != nil {
		t.Fatal(err)
	}
	valSummary, err := uncertainty.CombineSeeds([]uncertainty.Summary{val})
	if err != nil {
		t.Fatal(err)
	}
	zm, _ := NewMethod("Zero-Shot", []Run{zero})
	um, _ := NewMethod("UMAD", []Run{umad})
	methods := []Method{um, zm, ippo, {Name: "train-val", Summary: valSummary}}
	dir := t.TempDir()
	if err := WriteTable1(dir, methods, TableOptions{Baseline: "Zero-Shot"}); err != nil {
		t.Fatal(err)
	}
	md := readFile(t, filepath.Join(dir, Table1File))
	for _, want := range []string{
		"| Method | Agent | gsm8k T=1 | gsm8k T=2 | gsm8k T=3 | math T=1 | math T=2 | math T=3 | Average T=1 | Average T=2 | Average T=3 |",
		"| Zero-Shot | A0 | 50.0 ± 0.0 | 50.0 ± 0.0 |",
		"| UMAD | A0 | 50.0 ± 0.0 (+0.0 [+0.0, +0.0]) | 100.0 ± 0.0 (+50.0 [+",
		"| UMAD | A1 | 33.3 ± 0.0 (+0.0 [+0.0, +0.0]) |",
		// IPPO's seeds: one trained (100 %), one not (50 %) at T=2.
		"| IPPO | A0 | 50.0 ± 0.0 (+0.0 [+0.0, +0.0]) | 75.0 ± 25.0 (+25.0 [+",
		// No problem records: a difference without interval; no T=3.
		"| train-val | A0 | 50.0 (+0.0) | 100.0 (+50.0) | – |",
		"difference from Zero-Shot",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table1.md lacks %q\n%s", want, md)
		}
	}
	rows := readCSV(t, filepath.Join(dir, Table1CSVFile))
	for _, tc := range []struct {
		method, agent, dataset, T string
		diff                      float64
		significant               string
	}{
		{"UMAD", "0", "math", "2", 0.5, "true"},
		{"UMAD", "0", "average", "3", 0.5, "true"},
		{"UMAD", "0", "gsm8k", "1", 0, "false"},
		{"UMAD", "1", "average", "2", 0, "false"},
		{"IPPO", "0", "average", "2", 0.25, "true"},
	} {
		key := []string{tc.method, tc.agent, tc.dataset, tc.T}
		checkNumber(t, rows, "diff", tc.diff, key...)
		lo, _ := strconv.ParseFloat(field(t, rows, "ci_low", key...), 64)
		hi, _ := strconv.ParseFloat(field(t, rows, "ci_high", key...), 64)
		if lo > tc.diff || hi < tc.diff || (tc.diff > 0 && (lo <= 0 || hi > 1)) {
			t.Errorf("%v: interval [%g, %g] around %g", key, lo, hi, tc.diff)
		}
		if got := field(t, rows, "excludes_zero", key...); got != tc.significant {
			t.Errorf("%v: excludes_zero %s, want %s", key, got, tc.significant)
		}
		if got := field(t, rows, "paired_problems", key...); tc.dataset != "average" && got != "12" {
			t.Errorf("%v: %s paired problems, want 12", key, got)
		}
	}
	// The whole table again gives the same intervals (a fixed bootstrap seed).
	again := t.TempDir()
	if err := WriteTable1(again, methods, TableOptions{Baseline: "Zero-Shot"}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(again, Table1CSVFile)) != readFile(t, filepath.Join(dir, Table1CSVFile)) {
		t.Error("a second table1.csv differs")
	}

	page := readFile(t, filepath.Join(dir, Table1HTMLFile))
	for _, want := range []string{"<!DOCTYPE html>", "background:#f4f5f7", tint(gainColour, 75), "<th colspan=\"3\">Average</th>", "class=\"sig\""} {
		if !strings.Contains(page, want) {
			t.Errorf("table1.html lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://", "<link"} {
		if strings.Contains(page, banned) {
			t.Errorf("table1.html is not self-contained: %q", banned)
		}
	}
	// IPPO's agent 0 loses nothing and gains 25 points at most: blue, never pink.
	if strings.Contains(page, tint(lossColour, 10)) {
		t.Error("a loss colour where no method loses")
	}
	noTempFiles(t, dir)

	if err := WriteTable1(t.TempDir(), methods, TableOptions{Baseline: "nope"}); err == nil ||
		!strings.Contains(err.Error(), `no method named "nope" (methods: UMAD, Zero-Shot, IPPO, train-val)`) {
		t.Errorf("unknown baseline: %v", err)
	}
	if err := WriteTable1(t.TempDir(), methods, TableOptions{Turns: []int{0}}); err == nil {
		t.Error("T=0 accepted")
	}
	// T beyond every run is left out; T=2 alone.
	one := t.TempDir()
	if err := WriteTable1(one, methods, TableOptions{Turns: []int{2, 9}}); err != nil {
		t.Fatal(err)
	}
	if md := readFile(t, filepath.Join(one, Table1File)); !strings.Contains(md, "| Method | Agent | gsm8k T=2 | math T=2 | Average T=2 |") {
		t.Errorf("T=2 only:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(one, Table1HTMLFile)); err != nil {
		t.Error(err)
	}
}
