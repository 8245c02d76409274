package cli

// `umad debate --nproc N`: N processes on this machine, each with its own engines, debate
// interleaved shares of the problems and append to their own rollout files
// (seed-S/rollouts.rank-R.jsonl.zst); the launcher then folds those into the seed's
// rollouts file in problem order and writes the report. Every sample's random stream
// derives from (seed, problem, agent, turn, trajectory), so the split changes no draw; the
// summary is the one-process run's up to llama.cpp's batch-dependent rounding (README
// "Debates"). A run stopped part-way resumes with any N: finished problems are found in
// every rank's file.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/uncertainty"
)

const rolloutsFile = "rollouts.jsonl.zst"

// rankPart is the share of the problems one process debates: problem i is rank i mod world's,
// so that easy and hard stretches of a data file spread over the ranks.
type rankPart struct{ rank, world int }

func (p rankPart) owns(i int) bool { return p.world <= 1 || i%p.world == p.rank }

// file is where the part appends its debates.
func (p rankPart) file() string {
	if p.world <= 1 {
		return rolloutsFile
	}
	return fmt.Sprintf("rollouts.rank-%d.jsonl.zst", p.rank)
}

// rankFiles lists a seed directory's rank files.
func rankFiles(dir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dir, "rollouts.rank-*.jsonl.zst"))
}

// readDone reads every problem finished in a seed directory: its rollouts file and every
// rank's.
func readDone(dir string) (map[int]uncertainty.ProblemRecord, error) {
	files, err := rankFiles(dir)
	if err != nil {
		return nil, err
	}
	done := map[int]uncertainty.ProblemRecord{}
	for _, f := range append([]string{filepath.Join(dir, rolloutsFile)}, files...) {
		part, err := readDebateRecords(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for i, r := range part {
			done[i] = r
		}
	}
	return done, nil
}

// mergeRanks folds each seed's rank files into the seed's rollouts file.
func mergeRanks(out string, seeds []uint64) error {
	for _, seed := range seeds {
		if err := mergeSeed(filepath.Join(out, fmt.Sprintf("seed-%d", seed))); err != nil {
			return err
		}
	}
	return nil
}

// writeDebateReport writes a run's report from its rollouts.
func writeDebateReport(c *ucli.Context, out string) error {
	if _, err := rebuildReport(out); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "report: %s\n", filepath.Join(out, "report", report.ReportFile))
	return nil
}

// mergeSeed folds a seed directory's rank files into its rollouts file, in problem order
// (the file is replaced atomically, then the rank files are removed).
func mergeSeed(dir string) error {
	files, err := rankFiles(dir)
	if err != nil || len(files) == 0 {
		return err
	}
	byIndex := map[int]json.RawMessage{}
	for _, f := range append([]string{filepath.Join(dir, rolloutsFile)}, files...) {
		_, err := rollouts.Read(f, func(line []byte) error {
			var r struct {
				Index int `json:"index"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			if _, ok := byIndex[r.Index]; !ok {
				byIndex[r.Index] = append(json.RawMessage(nil), line...)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("merge %s: %w", f, err)
		}
	}
	idx := make([]int, 0, len(byIndex))
	for i := range byIndex {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	recs := make([]json.RawMessage, len(idx))
	for j, i := range idx {
		recs[j] = byIndex[i]
	}
	if err := rollouts.WriteFile(filepath.Join(dir, rolloutsFile), recs); err != nil {
		return fmt.Errorf("merge the ranks' rollouts: %w", err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}
