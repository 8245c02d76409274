package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
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

// A training run's directory takes its settings once; a resume may train on to more steps
// (config.json then records them), except on a cosine schedule, and nothing else may
// change.
func TestClaimTrainDir(t *testing.T) {
	dir := t.TempDir()
	s := TrainSettings{Synthetic: 8, Trainer: trainer.Settings{Steps: 2, Opt: trainspec.AdamW{LR: 1e-6}, Loss: trainspec.LossPPO,
		DType: trainspec.PrecisionF32, RolloutDType: trainer.RolloutF32, Sync: trainer.SyncInPlace}}
	claim := func(s TrainSettings) error {
		save, err := ClaimTrainDir(dir, s)
		if err == nil {
			err = save()
		}
		return err
	}
	if err := claim(s); err != nil {
		t.Fatal(err)
	}
	s.Trainer.Steps = 4
	if err := claim(s); err != nil {
		t.Fatalf("a resume to more steps: %v", err)
	}
	var saved TrainSettings
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err != nil || json.Unmarshal(b, &saved) != nil || saved.Trainer.Steps != 4 {
		t.Errorf("config.json records %d steps (%v), want 4", saved.Trainer.Steps, err)
	}
	cosine := s
	cosine.Trainer.Schedule.Kind, cosine.Trainer.Steps = trainer.ScheduleCosine, 6
	if err := claim(cosine); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("another schedule: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	s.Trainer.Schedule.Kind = trainer.ScheduleCosine
	if err := claim(s); err != nil {
		t.Fatal(err)
	}
	s.Trainer.Steps = 6
	if err := claim(s); err == nil || !strings.Contains(err.Error(), "cosine learning-rate schedule, which depends on the count; resume it with --steps 4") {
		t.Errorf("more steps on a cosine schedule: %v", err)
	}
	s.Trainer.Steps, s.Trainer.Opt.LR = 4, 2e-6
	if err := claim(s); err == nil || !strings.Contains(err.Error(), "trainer.optimizer.LR: 0.000001 there, 0.000002 here") {
		t.Errorf("another learning rate: %v", err)
	}
}

// The cores are shared among a machine's ranks, and between an overlapped run's rollout
// engines and libtorch, where the threads were not given.
func TestTrainSharesCores(t *testing.T) {
	half := max(1, runtime.NumCPU()/2)
	for _, tc := range []struct {
		name                     string
		overlap, local           int
		threads, torchThreads    int
		threadsGiven, torchGiven bool
		wantThreads, wantTorch   int
	}{
		{"one process", 0, 1, 0, 0, false, false, 0, 0},
		{"overlap", 1, 1, 0, 0, false, false, engine.SharedThreads(2), half},
		{"overlap, --threads 3", 1, 1, 3, 0, true, false, 3, 0},
		{"overlap, --torch-threads 2", 1, 1, 0, 2, false, true, 0, 2},
		{"4 ranks", 0, 4, 0, 0, false, false, engine.SharedThreads(4), max(1, runtime.NumCPU()/4)},
		{"4 ranks, --threads 0", 0, 4, 0, 0, true, false, 0, max(1, runtime.NumCPU()/4)},
	} {
		tr := Train{Settings: TrainSettings{Agents: make([]TrainAgent, 1), Trainer: trainer.Settings{Overlap: tc.overlap}},
			TorchThreads: tc.torchThreads, ThreadsGiven: tc.threadsGiven, TorchThreadsGiven: tc.torchGiven}
		tr.Rollout.Engine.Threads = tc.threads
		tr.ShareCores(launch.Spec{World: tc.local, LocalWorld: tc.local})
		if tr.Rollout.Engine.Threads != tc.wantThreads || tr.TorchThreads != tc.wantTorch {
			t.Errorf("%s: %d engine threads, %d libtorch threads; want %d, %d", tc.name, tr.Rollout.Engine.Threads, tr.TorchThreads, tc.wantThreads, tc.wantTorch)
		}
	}
}
