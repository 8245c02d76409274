package run

// A training run's directory: claimed for its settings, with --steps free to grow on a
// resume, and emptied again when a new run fails before its first step.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
)

// claim checks Out against Resume and the settings (ClaimTrainDir) and returns whether it
// holds a run and what saves the config of a new one, with the command that made it.
func (t *Train) claim() (exists bool, save func() error, err error) {
	_, statErr := os.Stat(filepath.Join(t.Out, "config.json"))
	exists = statErr == nil
	switch {
	case exists && !t.Resume:
		return exists, nil, fmt.Errorf("%s holds a training run; pass --resume to continue it, or choose another --out", t.Out)
	case !exists && t.Resume:
		return exists, nil, fmt.Errorf("--resume: %s holds no training run", t.Out)
	}
	save, err = ClaimTrainDir(t.Out, t.Settings)
	return exists, RecordCommand(t.Out, t.Command, save), err
}

// abandonRun empties the directory of a new run that failed before it logged a step (an
// adapter whose weights are not usable, a model llama.cpp refuses), so that the
// corrected command can use it. ClaimDir found the directory empty, so all in it is
// this start's; config.json goes last, so that an interrupted clean-up leaves a run that
// --resume takes. A run with a logged step or a checkpoint stays, to be resumed.
func abandonRun(dir string) {
	if _, err := os.Stat(filepath.Join(dir, trainer.CheckpointsDir)); err == nil {
		return
	}
	if train, _, err := trainlog.Read(filepath.Join(dir, trainlog.File)); len(train) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != runlock.File && e.Name() != "config.json" {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(filepath.Join(dir, "config.json"))
}

// ClaimTrainDir is ClaimDir, except that --steps may change between runs of one
// directory: a resume then trains on to the new count. A cosine schedule depends on the
// count, so there it must stay. At the same trainer dtype, the rollout dtype is named before
// any other difference, as its default depends on the machine (a GPU's run resumed on the
// CPU needs the flag).
func ClaimTrainDir(dir string, rc TrainSettings) (save func() error, err error) {
	path := filepath.Join(dir, "config.json")
	var old TrainSettings
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &old) != nil {
		return ClaimDir(dir, rc) // it reports unreadable files
	}
	if r := old.Trainer.RolloutDType; r != rc.Trainer.RolloutDType && old.Trainer.DType == rc.Trainer.DType {
		return nil, fmt.Errorf("%s holds a run with %s rollout weights, not %s (the default: bf16 with llama.cpp on a GPU or --dtype bf16, else f32); resume it with --rollout-dtype %s", dir, r, rc.Trainer.RolloutDType, r)
	}
	if old.Trainer.Steps == rc.Trainer.Steps {
		return ClaimDir(dir, rc)
	}
	same := rc
	same.Trainer.Steps = old.Trainer.Steps
	if _, err := ClaimDir(dir, same); err != nil {
		return nil, err
	}
	if rc.Trainer.Schedule.Kind == trainer.ScheduleCosine {
		return nil, fmt.Errorf("%s trains %d steps on a cosine learning-rate schedule, which depends on the count; resume it with --steps %d", dir, old.Trainer.Steps, old.Trainer.Steps)
	}
	want, err := json.MarshalIndent(rc, "", "  ")
	if err != nil {
		return nil, err
	}
	return func() error { return atomicfile.WriteBytes(path, append(want, '\n')) }, nil
}
