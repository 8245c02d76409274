package report

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// WriteComparison writes runs side by side into dir: compare.md with per-turn tables of
// strict and robust accuracy and of the team's uncertainty (one column per run and
// agent, dataset by dataset), and compare.csv with every row of every run.
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
		names[i] = r.Name
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
	for _, d := range datasets {
		fmt.Fprintf(&b, "## %s\n\n", d)
		var accuracy, team []tableColumn
		for _, r := range runs {
			agents := agentIndices(r.Summary.Mean.Agents, false)
			accuracy = append(accuracy, runColumns(r.Name+" ", r.Summary, []string{d}, agents)...)
			team = append(team, tableColumn{header: r.Name, run: r.Summary, dataset: d, agent: uncertainty.System})
		}
		b.WriteString("Accuracy, strict grading:\n\n")
		turnTable(&b, turns, accuracy, percentCell(strictAccuracy))
		b.WriteString("Accuracy, robust grading:\n\n")
		turnTable(&b, turns, accuracy, percentCell(robustAccuracy))
		b.WriteString("Team uncertainty:\n\n")
		turnTable(&b, turns, team, uncertaintyCell)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
