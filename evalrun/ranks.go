package evalrun

// `umad debate --nproc N`: N processes on this machine, each with its own engines, debate
// interleaved shares of the problems and append to their own rollout files
// (seed-S/rollouts.rank-R.jsonl.zst); the launcher then folds those into the seed's
// rollouts file in problem order and writes the report. Every sample's random stream
// derives from (seed, problem, agent, turn, trajectory) and llama.cpp's logits do not
// depend on the batch (build.sh), so the merged file has the one-process run's bytes
// (README "Debates"). A run stopped part-way resumes with any N: finished problems are
// found in every rank's file.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/rollouts"
)

// RolloutsFile is a seed directory's rollouts, every problem in problem order.
const RolloutsFile = "rollouts.jsonl.zst"

// Part is the share of the problems one process debates: problem i is rank i mod world's,
// so that easy and hard stretches of a data file spread over the ranks.
type Part struct{ Rank, World int }

func (p Part) owns(i int) bool { return p.World <= 1 || i%p.World == p.Rank }

// file is where the part appends its debates.
func (p Part) file() string {
	if p.World <= 1 {
		return RolloutsFile
	}
	return fmt.Sprintf("rollouts.rank-%d.jsonl.zst", p.Rank)
}

// SeedDir is the directory of one seed's rollouts in run directory out.
func SeedDir(out string, seed uint64) string {
	return filepath.Join(out, fmt.Sprintf("seed-%d", seed))
}

// Launch runs a multi-process evaluation from its launcher: this machine's ranks of d each
// run the same command on their part (Run with Part{d.Rank, d.World}), then their shares
// are merged into each seed's rollouts file.
func Launch(out string, seeds []uint64, d launch.Spec, o launch.Output) error {
	if err := launch.Start(d, d.Timeout, o); err != nil {
		return err
	}
	return Merge(out, seeds)
}

// rankFiles lists a seed directory's rank files.
func rankFiles(dir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dir, "rollouts.rank-*.jsonl.zst"))
}

// Merge folds each seed's rank files into the seed's rollouts file: after a multi-process
// run, or before resuming one that was stopped.
func Merge(out string, seeds []uint64) error {
	for _, seed := range seeds {
		if err := mergeSeed(SeedDir(out, seed)); err != nil {
			return err
		}
	}
	return nil
}

// mergeSeed folds a seed directory's rank files into its rollouts file, in problem order
// (the file is replaced atomically, then the rank files are removed).
func mergeSeed(dir string) error {
	files, err := rankFiles(dir)
	if err != nil || len(files) == 0 {
		return err
	}
	return writeInOrder(dir, files)
}

// writeInOrder rewrites dir's rollouts file with its records and those of the rank files
// in problem order, atomically, then removes the rank files. Problems are appended as they
// finish, in an order that follows timing; a finished seed in problem order has the same
// bytes whatever the timing.
func writeInOrder(dir string, rankFiles []string) error {
	byIndex, err := readByIndex(append([]string{filepath.Join(dir, RolloutsFile)}, rankFiles...))
	if err != nil {
		return err
	}
	idx := slices.Sorted(maps.Keys(byIndex))
	recs := make([]json.RawMessage, len(idx))
	for j, i := range idx {
		recs[j] = byIndex[i]
	}
	if err := rollouts.WriteFile(filepath.Join(dir, RolloutsFile), recs); err != nil {
		return fmt.Errorf("write the rollouts in problem order: %w", err)
	}
	for _, f := range rankFiles {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}

// readByIndex reads the records of files by problem index, the first of each index kept.
func readByIndex(files []string) (map[int]json.RawMessage, error) {
	byIndex := map[int]json.RawMessage{}
	for _, f := range files {
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
			return nil, fmt.Errorf("merge %s: %w", f, err)
		}
	}
	return byIndex, nil
}
