package cli

import (
	"reflect"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/run"
)

// A training run given no setting but its agent and directory resolves to
// run.DefaultTrainSettings: the flags show its defaults, and the dependent ones follow
// run.DefaultRolloutDType, DefaultProbeTol and DefaultTISCap.
func TestTrainDefaultsAreTheFlags(t *testing.T) {
	r, err := resolveTrainArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	got, want := r.TrainSettings, run.DefaultTrainSettings()
	got.Agents, got.Trainer.Agents = nil, nil
	w := &want.Trainer
	w.RolloutDType = run.DefaultRolloutDType(engine.DefaultGPULayers(), w.DType)
	w.ProbeTol, w.TISCap = run.DefaultProbeTol(w.DType, w.RolloutDType), run.DefaultTISCap(w.DType, w.RolloutDType, w.Overlap)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("a run with no setting resolves to\n%+v\nthe defaults are\n%+v", got, want)
	}
	if r.epochs != run.DefaultEpochs {
		t.Errorf("epochs %d, want %d", r.epochs, run.DefaultEpochs)
	}
}
