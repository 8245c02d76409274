// Package report writes the outputs of a debate evaluation: summary.json, one CSV per
// table, a Markdown report with paper-style tables, and figures in SVG and PNG; a
// side-by-side comparison of several runs; and the report of a training run (curves,
// before/after validation, step-time breakdown). Every file is written atomically.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/uncertainty"
)

// EntropyUnit names the unit of every entropy in the outputs (natural log).
const EntropyUnit = "nats"

// Run is one evaluation to report.
type Run struct {
	Name string
	// Protocol names the debate protocol the samples come from (debate.Protocol, with
	// the probe protocol's continuation), for report.md and summary.json.
	Protocol string
	// Summary is the mean and deviation over the run's seeds (uncertainty.CombineSeeds;
	// a single seed has Seeds = 1).
	Summary uncertainty.Combined
	// Problems, when present, are written to problems.csv, one line per problem and turn.
	Problems []uncertainty.ProblemRecord
	// Replicates, when present, hold each seed's problems, for Table 1's paired intervals.
	Replicates []Replicate
	// Partial says which seeds left problems unfinished ("seed 1: 19 of 200 problems
	// finished"); Complete that the caller found every problem of every seed finished.
	Partial  string
	Complete bool
}

// Replicate is one seed's problem records; Key names the seed.
type Replicate struct {
	Key      string
	Problems []uncertainty.ProblemRecord
	// Rollouts, when set, is the seed's rollouts file, whose responses the debate browser
	// shows (WriteBrowser).
	Rollouts string
}

// summaryFile is the layout of summary.json.
type summaryFile struct {
	Name        string `json:"name"`
	Protocol    string `json:"protocol,omitempty"`
	EntropyUnit string `json:"entropy_unit"`
	Partial     string `json:"partial,omitempty"`
	Complete    bool   `json:"complete,omitempty"`
	uncertainty.Combined
}

// File names inside a run's report directory.
const (
	SummaryFile     = "summary.json"
	AccuracyFile    = "accuracy.csv"
	UncertaintyFile = "uncertainty.csv"
	FlipsFile       = "flips.csv"
	ProblemsFile    = "problems.csv"
	ReportFile      = "report.md"
	CompareFile     = "compare.md"
	CompareCSVFile  = "compare.csv"
	CompareFigure   = "compare-uncertainty" // .svg and .png
)

// Write writes the report of one run into dir: summary.json, accuracy.csv,
// uncertainty.csv, flips.csv, problems.csv (with Problems), report.md and the figures
// accuracy, uncertainty and flips (the last when there are several turns) as .svg and .png.
func Write(dir string, run Run) error {
	s := run.Summary
	if len(s.Mean.Rows) == 0 {
		return fmt.Errorf("report %s: empty summary", dir)
	}
	data, err := json.MarshalIndent(summaryFile{Name: run.Name, Protocol: run.Protocol, EntropyUnit: EntropyUnit,
		Partial: run.Partial, Complete: run.Complete, Combined: s}, "", "  ")
	if err != nil {
		return fmt.Errorf("report %s: %w", dir, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, SummaryFile), append(data, '\n')); err != nil {
		return err
	}
	tables := []struct {
		name  string
		write func(io.Writer, uncertainty.Combined) error
	}{
		{AccuracyFile, writeAccuracyCSV},
		{UncertaintyFile, writeUncertaintyCSV},
		{FlipsFile, writeFlipsCSV},
	}
	for _, tb := range tables {
		if err := atomicfile.Write(filepath.Join(dir, tb.name), func(w io.Writer) error { return tb.write(w, s) }); err != nil {
			return err
		}
	}
	if len(run.Problems) > 0 {
		if err := atomicfile.Write(filepath.Join(dir, ProblemsFile), func(w io.Writer) error {
			return writeProblemsCSV(w, run.Problems)
		}); err != nil {
			return err
		}
	}
	figures, err := writeFigures(dir, s)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ReportFile), func(w io.Writer) error {
		return writeMarkdown(w, run, figures)
	})
}

// ReadRun reads the summary.json that Write left in dir (Problems stay empty).
func ReadRun(dir string) (Run, error) {
	path := filepath.Join(dir, SummaryFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Run{}, fmt.Errorf("read run: %w", err)
	}
	var f summaryFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Run{}, fmt.Errorf("read %s: %w", path, err)
	}
	if f.EntropyUnit != EntropyUnit {
		return Run{}, fmt.Errorf("read %s: entropy unit %q, want %q", path, f.EntropyUnit, EntropyUnit)
	}
	if f.Seeds < 1 || len(f.Mean.Rows) == 0 || len(f.Std.Rows) != len(f.Mean.Rows) {
		return Run{}, fmt.Errorf("read %s: not a run summary (no seeds or no rows)", path)
	}
	return Run{Name: f.Name, Protocol: f.Protocol, Summary: f.Combined, Partial: f.Partial, Complete: f.Complete}, nil
}
