package run

import (
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/trainer"
)

// Without steps, a run trains Epochs passes over its whole batches, in the settings too,
// and validates on the built-in set's other seed.
func TestTrainLoadStepsFromEpochs(t *testing.T) {
	tr := Train{Epochs: 2, Settings: TrainSettings{Synthetic: 10, ValProblems: 4, SynthSeed: 1, SynthConfig: data.DefaultSynthetic,
		Trainer: trainer.Settings{BatchSize: 3}}}
	if err := tr.Load(); err != nil {
		t.Fatal(err)
	}
	cfg := tr.Config()
	if tr.Settings.Trainer.Steps != 6 || cfg.Steps != 6 || len(cfg.Problems) != 10 || len(cfg.ValProblems) != 4 {
		t.Errorf("%d steps (config %d) over %d problems, %d to validate; want 6 over 10, 4", tr.Settings.Trainer.Steps, cfg.Steps, len(cfg.Problems), len(cfg.ValProblems))
	}
	if cfg.ValProblems[0] == cfg.Problems[0] {
		t.Error("the validation problems are the training ones")
	}
	tr.Settings.Trainer.Steps, tr.Settings.Trainer.BatchSize = 0, 11
	if err := tr.Load(); err == nil || !strings.Contains(err.Error(), "10 problems are fewer than one batch of 11") {
		t.Errorf("a batch larger than the problems: %v", err)
	}
}

// A sequence must fit the context it is given, and a given prompt limit the context the
// model was trained with; the default limit may run past it.
func TestTrainLengths(t *testing.T) {
	tr := Train{Settings: TrainSettings{Trainer: trainer.Settings{PromptLimit: 100}}}
	if err := tr.checkLengths(50, 120, "m"); err != nil {
		t.Errorf("the default prompt limit past the trained context: %v", err)
	}
	tr.PromptLimitGiven = true
	if err := tr.checkLengths(50, 120, "m"); err == nil || !strings.Contains(err.Error(), "--prompt-limit 100 plus --max-tokens 50 is more than the 120 tokens of context m was trained with") {
		t.Errorf("a given prompt limit past the trained context: %v", err)
	}
	tr.CtxGiven, tr.Rollout.Engine.SeqContext = true, 140
	if err := tr.checkLengths(50, 0, "m"); err == nil || !strings.Contains(err.Error(), "more than --ctx 140") {
		t.Errorf("a sequence past --ctx: %v", err)
	}
	if err := tr.checkLengths(200, 120, "m"); err == nil || !strings.HasPrefix(err.Error(), "--max-tokens 200 is more than the 120 tokens") {
		t.Errorf("a response past the trained context: %v", err)
	}
}
