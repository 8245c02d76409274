// Package evalrun runs a debate evaluation: every problem debated once per seed, each
// finished problem appended to the seed's rollouts at once so that a stopped run resumes
// where it stopped, and several processes' shares merged into one file per seed
// (ranks.go). run.Debate (`umad debate`) calls it.
package evalrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/uncertainty"
)

// Run is one evaluation's debates.
type Run struct {
	// Debate is the debate of every seed; its agents' seeds and its prompt seed are set
	// per seed: agent i draws from seed + SeedOffsets[i].
	Debate      debate.Config
	SeedOffsets []uint64
	Problems    []data.Problem
	// Check, when not nil, judges each finished problem's records before they are saved
	// (a verifier model).
	Check func([]debate.Record) error
	// Part is this process's share of the problems.
	Part Part
	// Progress gets the progress line and each seed's summary.
	Progress io.Writer
}

// Seeds debates every seed's problems not yet in out/seed-S; an interruption of ctx
// returns launch.ErrInterrupted.
func (r Run) Seeds(ctx context.Context, out string, seeds []uint64) error {
	for _, seed := range seeds {
		if err := r.seed(ctx, seed, SeedDir(out, seed)); err != nil {
			if ctx.Err() != nil {
				return launch.ErrInterrupted
			}
			return err
		}
	}
	return nil
}

// seed debates every problem of the part not yet in dir's rollouts, appending each
// finished one to the part's own file once Check has judged it; a one-process run then
// rewrites the finished file in problem order.
func (r Run) seed(ctx context.Context, seed uint64, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, r.Part.file())
	if _, err := rollouts.Repair(path); err != nil {
		return err
	}
	done, err := Done(dir)
	if err != nil {
		return err
	}
	w, err := rollouts.OpenAppend(path)
	if err != nil {
		return err
	}
	defer w.Close()
	dcfg := r.Debate
	for i := range dcfg.Agents {
		dcfg.Agents[i].Seed = seed + r.SeedOffsets[i]
	}
	dcfg.Prompt.Seed = seed
	todo := 0
	for i := range r.Problems {
		if _, ok := done[i]; !ok && r.Part.owns(i) {
			todo++
		}
	}
	if todo > 0 {
		if err := r.debate(ctx, dcfg, seed, done, todo, w); err != nil {
			return err
		}
	}
	if r.Part.World > 1 {
		return nil // the launcher merges the ranks' files in problem order
	}
	if len(done) == 0 {
		return errors.New("no problem could be debated (all prompts exceed --prompt-limit?)")
	}
	if todo == 0 {
		return nil
	}
	if err := w.Close(); err != nil {
		return err
	}
	return writeInOrder(dir, nil)
}

// debate runs the todo problems not in done, appending each to w and adding it to done.
func (r Run) debate(ctx context.Context, dcfg debate.Config, seed uint64, done map[int]uncertainty.ProblemRecord, todo int, w *rollouts.Writer) error {
	p := progress{w: r.Progress, seed: seed, todo: todo, all: len(r.Problems), start: time.Now()}
	p.show(len(done))
	stats, err := debate.Run(ctx, dcfg, r.Problems, func(i int) bool { _, ok := done[i]; return ok || !r.Part.owns(i) },
		func(rec debate.Record) error {
			if r.Check != nil {
				if err := r.Check([]debate.Record{rec}); err != nil {
					return err
				}
			}
			if err := w.Append(rec); err != nil {
				return err
			}
			done[rec.Index] = ProblemRecord(rec)
			p.finished++
			p.tokens += recordTokens(rec)
			p.show(len(done))
			return nil
		})
	fmt.Fprintln(r.Progress)
	if err != nil {
		return err
	}
	p.summary(stats)
	return nil
}

// progress is a seed's progress line.
type progress struct {
	w                   io.Writer
	seed                uint64
	todo, all, finished int
	tokens              int64
	start               time.Time
}

func (p *progress) show(done int) {
	el := time.Since(p.start).Seconds()
	eta := "?"
	if p.finished > 0 {
		eta = (time.Duration(el/float64(p.finished)*float64(p.todo-p.finished)) * time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\rseed %d: %d/%d problems, %.0f tok/s, ETA %s   ", p.seed, done, p.all, float64(p.tokens)/max(el, 1e-9), eta)
}

func (p *progress) summary(stats debate.Stats) {
	saved := 0.0
	if n := stats.Generations + stats.Carried; n > 0 {
		saved = float64(stats.Carried) / float64(n)
	}
	fmt.Fprintf(p.w, "seed %d: %d problems, %d tokens in %s (%.0f tok/s); %d prompts trimmed; %d skipped as too long; adaptive stopping saved %.1f%% of generations\n",
		p.seed, stats.Problems, stats.GeneratedTokens, time.Since(p.start).Round(time.Millisecond),
		float64(stats.GeneratedTokens)/time.Since(p.start).Seconds(), stats.Trimmed, stats.SkippedOverlong, 100*saved)
}

// recordTokens counts the tokens a debate record's responses hold.
func recordTokens(r debate.Record) int64 {
	var n int64
	for t, turn := range r.Turns {
		for _, byTraj := range turn {
			for _, at := range byTraj {
				n += int64(len(at.Tokens))
			}
		}
		if r.Continuations != nil {
			for _, at := range r.Continuations[t] {
				n += int64(len(at.Tokens))
			}
		}
	}
	return n
}

// Done reads every problem finished in a seed directory: its rollouts file and every
// rank's.
func Done(dir string) (map[int]uncertainty.ProblemRecord, error) {
	files, err := rankFiles(dir)
	if err != nil {
		return nil, err
	}
	done := map[int]uncertainty.ProblemRecord{}
	for _, f := range append([]string{filepath.Join(dir, RolloutsFile)}, files...) {
		part, err := ReadRecords(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for i, r := range part {
			done[i] = r
		}
	}
	return done, nil
}

// ReadRecords reads a rollouts file into problem index -> metrics record.
func ReadRecords(path string) (map[int]uncertainty.ProblemRecord, error) {
	done := map[int]uncertainty.ProblemRecord{}
	err := ReadDebates(path, func(r debate.Record) error {
		done[r.Index] = ProblemRecord(r)
		return nil
	})
	return done, err
}

// ReadDebates calls fn with each debate record of a rollouts file, in file order, one
// at a time: a caller keeps what it needs, not every token of the file.
func ReadDebates(path string, fn func(debate.Record) error) error {
	_, err := rollouts.Read(path, func(line []byte) error {
		var r debate.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		return fn(r)
	})
	return err
}

// ProblemRecord is a debate record as the uncertainty tables read it.
func ProblemRecord(r debate.Record) uncertainty.ProblemRecord {
	return uncertainty.ProblemRecord{Dataset: r.Problem.Dataset, ID: r.Problem.ID, Answers: r.Verdicts()}
}

// InProblemOrder lists the records by problem index.
func InProblemOrder(done map[int]uncertainty.ProblemRecord) []uncertainty.ProblemRecord {
	idx := slices.Sorted(maps.Keys(done))
	recs := make([]uncertainty.ProblemRecord, len(idx))
	for j, i := range idx {
		recs[j] = done[i]
	}
	return recs
}
