package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compare.md's turn-gain table: agent 0 turns wrong to right at the last turn on the odd
// problems (+50 points, an interval clear of zero), agent 1 never changes (+0.0 [+0.0,
// +0.0]), their mean +25; a run without problem records has no row.
func TestTurnGainTable(t *testing.T) {
	correct := func(i, a, turn int) bool { return i%2 == 0 || (a == 0 && turn == 2) }
	run := debateRun(t, "after", debateRecords(12, 3, correct), "1", "2")
	noRecords := run
	noRecords.Name, noRecords.Replicates = "summary-only", nil
	dir := t.TempDir()
	if err := WriteComparison(dir, []Run{run, noRecords}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| after | A0 | 12 | +50.0 | [+25.0, +75.0] |",
		"| after | A1 | 12 | +0.0 | [+0.0, +0.0] |",
		"| after | mean of agents | 12 | +25.0 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("compare.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "| summary-only | A0 |") {
		t.Error("a run without problem records got a turn-gain row")
	}
}
