package run

// A debate run's records, checked against its config.json: what its report is made from
// (WriteDebateReport, also `umad report`'s) and what `umad experiment` counts as done.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/uncertainty"
)

// DebateRecords are a debate run's finished problems, seed by seed in its settings' order.
type DebateRecords struct {
	Settings DebateSettings
	Records  [][]uncertainty.ProblemRecord // in problem order
	// Rollouts are the seeds' rollouts files.
	Rollouts []string
	// Partial says which seeds lack problems ("seed 1: 19 of 200 problems finished"); ""
	// when every problem of every seed is finished.
	Partial string
}

// ReadDebate reads the debate run in dir. A record that disagrees with config.json (its
// agents, turns, samples, protocol, or the problem at its index) is an error: the
// config was edited, or the data changed since the run. A cut, truncated or deleted
// rollouts file only leaves problems unfinished.
func ReadDebate(dir string) (DebateRecords, error) {
	var run DebateRecords
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return run, fmt.Errorf("%s is not a debate run: %w", dir, err)
	}
	if err := json.Unmarshal(raw, &run.Settings); err != nil {
		return run, fmt.Errorf("%s/config.json: %w", dir, err)
	}
	if run.Settings.Data == "" && run.Settings.SyntheticSet == nil {
		return run, fmt.Errorf("%s/config.json names no problem set (an older umad wrote it), so the run's completeness is unknown; rerun it", dir)
	}
	ps, err := run.Settings.Problems()
	if err != nil {
		return run, fmt.Errorf("%s: its problems, which say whether the run is complete: %w", dir, err)
	}
	var partial []string
	for _, seed := range run.Settings.Seeds {
		path := filepath.Join(evalrun.SeedDir(dir, seed), evalrun.RolloutsFile)
		done := map[int]uncertainty.ProblemRecord{}
		err := evalrun.ReadDebates(path, func(r debate.Record) error {
			if r.Index < 0 || r.Index >= len(ps) || ps[r.Index].ID != r.Problem.ID || ps[r.Index].Dataset != r.Problem.Dataset {
				return fmt.Errorf("problem %d is %s/%s, which is not the problem at that index of its data; the data changed since the run",
					r.Index, r.Problem.Dataset, r.Problem.ID)
			}
			if err := run.Settings.checkRecord(r); err != nil {
				return fmt.Errorf("problem %d: %w; config.json does not describe this run", r.Index, err)
			}
			done[r.Index] = evalrun.ProblemRecord(r)
			return nil
		})
		if err != nil {
			return run, fmt.Errorf("%s: %w", path, err)
		}
		if len(done) < len(ps) {
			partial = append(partial, fmt.Sprintf("seed %d: %d of %d problems finished", seed, len(done), len(ps)))
		}
		run.Records = append(run.Records, evalrun.InProblemOrder(done))
		run.Rollouts = append(run.Rollouts, path)
	}
	run.Partial = strings.Join(partial, "; ")
	return run, nil
}

// checkRecord says where a debate record's shape differs from the run's config.
func (s DebateSettings) checkRecord(r debate.Record) error {
	if len(r.Turns) != s.Turns {
		return fmt.Errorf("%d turns, config.json says %d", len(r.Turns), s.Turns)
	}
	for t, turn := range r.Turns {
		if len(turn) != len(s.Agents) {
			return fmt.Errorf("turn %d has %d agents, config.json names %d", t, len(turn), len(s.Agents))
		}
		for a, samples := range turn {
			if len(samples) != s.K {
				return fmt.Errorf("turn %d agent %d has %d samples, config.json says k = %d", t, a, len(samples), s.K)
			}
		}
	}
	if probe := debate.Protocol(s.Protocol) == debate.Probe; probe != (r.Continuations != nil) {
		return fmt.Errorf("its continuations say another protocol than config.json's %s", s.Protocol)
	}
	return nil
}

// DebateReported says whether the run's summary.json, written when every problem of
// every seed was found finished, is newer than every seed's rollouts file: then nothing
// was cut since, and a plan need not read the rollouts again (tens of seconds a cell at
// the paper's lengths). A rollouts file as new as the summary is read, for a filesystem's
// coarse clock.
func DebateReported(dir string, seeds []uint64) bool {
	sum, err := os.Stat(filepath.Join(dir, "report", report.SummaryFile))
	if err != nil {
		return false
	}
	run, err := report.ReadRun(filepath.Join(dir, "report"))
	if err != nil || !run.Complete {
		return false
	}
	for _, seed := range seeds {
		info, err := os.Stat(filepath.Join(evalrun.SeedDir(dir, seed), evalrun.RolloutsFile))
		if err != nil || !info.ModTime().Before(sum.ModTime()) {
			return false
		}
	}
	return true
}

// WriteDebateReport recomputes a debate run's report from its rollouts; a run with
// problems left unfinished is reported as partial, saying how many.
func WriteDebateReport(dir string) (report.Run, error) {
	dr, err := ReadDebate(dir)
	if err != nil {
		return report.Run{}, fmt.Errorf("report: %w", err)
	}
	var summaries []uncertainty.Summary
	var all []uncertainty.ProblemRecord
	var replicates []report.Replicate
	for i, recs := range dr.Records {
		seed := dr.Settings.Seeds[i]
		if len(recs) == 0 {
			return report.Run{}, fmt.Errorf("report: %s seed %d has no finished problems yet", dir, seed)
		}
		s, err := uncertainty.Summarise(recs)
		if err != nil {
			return report.Run{}, err
		}
		summaries = append(summaries, s)
		all = append(all, recs...)
		replicates = append(replicates, report.Replicate{Key: fmt.Sprint(seed), Problems: recs, Rollouts: dr.Rollouts[i]})
	}
	combined, err := uncertainty.CombineSeeds(summaries)
	if err != nil {
		return report.Run{}, err
	}
	run := report.Run{Name: filepath.Base(filepath.Clean(dir)), Protocol: dr.Settings.ProtocolText(), Summary: combined, Problems: all,
		Replicates: replicates, Partial: dr.Partial, Complete: dr.Partial == ""}
	if err := report.Write(filepath.Join(dir, "report"), run); err != nil {
		return run, err
	}
	return run, report.WriteBrowser(filepath.Join(dir, "report"), []report.Method{{Name: run.Name, Summary: combined, Replicates: replicates}})
}
