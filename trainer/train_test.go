package trainer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

// The demo task: sums of two operands from 1..2 (answers 2, 3, 4), so a hidden-64 model can
// learn it in seconds.
var demoTask = data.SyntheticConfig{Terms: 2, MaxOperand: 2, Ops: "+"}

// warmStart teaches a tiny model the boxed answer format (a few epochs: the format is
// learned, the answers only partly) and returns the HF directory of the result.
func warmStart(t *testing.T, rt *torch.Runtime, arch string) string {
	t.Helper()
	problems, err := data.SyntheticWith(64, 1, demoTask)
	if err != nil {
		t.Fatal(err)
	}
	return warmStartOn(t, rt, arch, SyntheticPairs(problems), 4)
}

// warmStartOn trains a tiny model on text pairs for some epochs and returns the HF
// directory of the result.
func warmStartOn(t *testing.T, rt *torch.Runtime, arch string, text []TextPair, epochs int) string {
	t.Helper()
	dir := testmodel.Tiny(t, arch)
	tok, err := engine.OpenVocab(filepath.Join(dir, "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	f, err := tok.Format("")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := TokenizePairs(tok, f, tok.EndOfTurn(), text)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hfmodel.Load(rt, filepath.Join(dir, "hf"), torch.ModelOptions{Trainable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	opt := trainspec.DefaultAdamW
	opt.LR = 3e-3
	st, err := SFT(m.Model, pairs, SFTConfig{Epochs: epochs, BatchSize: 8, Opt: opt, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !(st.LastLoss < st.FirstLoss/2) {
		t.Fatalf("SFT loss %g -> %g: did not learn", st.FirstLoss, st.LastLoss)
	}
	out := filepath.Join(t.TempDir(), "sft")
	frozen, err := m.Clone(torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Free()
	if err := frozen.Save(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func demoConfig(t *testing.T, algo string, dirs []string, steps int) Config {
	t.Helper()
	a, err := LookupAlgo(algo)
	if err != nil {
		t.Fatal(err)
	}
	train, _ := data.SyntheticWith(64, 1, demoTask)
	val, _ := data.SyntheticWith(32, 1+1_000_003, demoTask) // umad train's held-out set for seed 1
	eng, err := engine.ParseOptions(16, 0, 1, "f32", "off")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Settings: Settings{Algo: a, Steps: steps, BatchSize: 16, Turns: 1, G: 8, MiniBatch: 4,
		Opt:     trainspec.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1},
		ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3, PromptLimit: 512, Seed: 1, ValEvery: steps, ValK: 4, ProbeTol: 1e-4},
		Data: Data{Problems: train, ValProblems: val}, Rollout: Rollout{Engine: eng}, Out: t.TempDir()}
	if a.Debate {
		cfg.Turns, cfg.BatchSize = 2, 8
	}
	for i, d := range dirs {
		cfg.Agents = append(cfg.Agents, Agent{Name: "a" + string(rune('0'+i)), Dir: d, MaxTokens: 16, SeedOffset: uint64(i) * 1000003,
			Params: sampler.Params{Temperature: 1, TopP: 1}})
	}
	return cfg
}

func readMetrics(t *testing.T, run string) (train []trainlog.StepMetrics, val []trainlog.ValMetrics) {
	t.Helper()
	train, val, err := trainlog.Read(filepath.Join(run, trainlog.File))
	if err != nil {
		t.Fatal(err)
	}
	return train, val
}

func meanAcc(v trainlog.ValMetrics) float64 {
	var s, n float64
	for _, byTurn := range v.Accuracy {
		for _, x := range byTurn {
			s += x
			n++
		}
	}
	return s / n
}

// The demo that learns: after a format-only warm start, RL steps raise held-out accuracy
// (32 problems x 4 samples, every agent and turn) far beyond the seed noise.
//
// Measured with the CLI on the same settings (build.sh demo's), training seeds 1-4:
//   - grpo (tiny qwen2, 10 steps, lr 3e-3): before 0.11-0.18, after 0.34-0.53; gain
//     0.23-0.41 (mean 0.30, std 0.08).
//   - umad (tiny qwen2 + tiny qwen3, 2 turns, 20 steps, lr 1e-3): before 0.149-0.174, after
//     0.369-0.408; gain 0.205-0.234 (mean 0.222, std 0.013); 0.238 with one torch thread.
//     This test itself (one torch thread in the warm start too, so slightly other starting
//     weights) measured 0.154 -> 0.586: the path through training varies more with the
//     starting weights than with the seed, but every run gained at least 0.2.
//
// The noise: validating the same weights with another sampling seed moves the accuracy by
// a std of about 0.01 (the four seeds' step-0 accuracies), so a step that learned nothing
// gives a gain of 0 +- 0.02. The test asks for 0.15 (grpo) and 0.12 (umad): below every
// measured gain and more than ten noise stds above zero. A fresh tiny model scores 0.
//
// LoRA (rank 8, alpha 16, all seven projections; embeddings, norms and the tied lm_head
// frozen) learns this task far more slowly: at 10 steps no lr in 1e-3..5e-2 gained more than
// 0.05, and 2e-2 and above collapsed to 0. Measured with this test's settings (lr 5e-3, 40
// steps), training seeds 1-3: gains 0.07-0.12 (0.117 -> 0.188, 0.172 -> 0.242, 0.102 ->
// 0.219). It asks for 0.05: below those, still 2.5-5 noise stds above zero. Since ggml's
// kernels are batch invariant (2026-12-06) the same run gains 0.086 (0.117 -> 0.203) on
// libtorch 1.13 but 0.047 on 2.6, where build.sh's torch2 skips it: LoRA's path here turns on
// the library's rounding (on 2.6, 60 steps gained 0.055 and lr 7e-3 0.078; on 1.13, lr 7e-3
// gained 0.024 and 1e-2 collapsed to 0), so no one setting clears 0.05 with margin on both.
func TestDemoLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for about two minutes")
	}
	rt := torchtest.Open(t)
	for _, tc := range []struct {
		algo    string
		archs   []string
		steps   int
		lr      float64
		minGain float64
		lora    int
	}{
		{"grpo", []string{"qwen2"}, 10, 3e-3, 0.15, 0},
		{"umad", []string{"qwen2", "qwen3"}, 20, 1e-3, 0.12, 0},
		{"grpo", []string{"qwen2"}, 40, 5e-3, 0.05, 8},
	} {
		name := tc.algo
		if tc.lora > 0 {
			name += fmt.Sprintf("-lora%d", tc.lora)
		}
		t.Run(name, func(t *testing.T) {
			var dirs []string
			for _, a := range tc.archs {
				dirs = append(dirs, warmStart(t, rt, a))
			}
			cfg := demoConfig(t, tc.algo, dirs, tc.steps)
			cfg.Opt.LR = tc.lr
			if tc.lora > 0 {
				cfg.LoRA = trainspec.LoRA{Rank: tc.lora, Alpha: 2 * float64(tc.lora), Targets: trainspec.LoRATargets}
			}
			if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
				t.Fatal(err)
			}
			train, val := readMetrics(t, cfg.Out)
			if len(val) != 2 || val[0].Step != 0 || val[1].Step != tc.steps {
				t.Fatalf("validation lines %+v, want steps 0 and %d", val, tc.steps)
			}
			if want := tc.steps * len(dirs) * cfg.Turns; len(train) != want {
				t.Fatalf("%d training lines, want one per step, agent and turn (%d)", len(train), want)
			}
			weighted := false
			for _, l := range train {
				weighted = weighted || l.Weight.Std > 0
				// Sync check: llama.cpp runs exactly the trained weights (F32, flash off).
				if !(l.ProbeGap < 1e-4) || !(l.Times.Sync > 0) || l.OptimSteps < 0 {
					t.Errorf("step %d agent %d turn %d: probe gap %g, sync %gs", l.Step, l.Agent, l.Turn, l.ProbeGap, l.Times.Sync)
				}
				if l.Turn == 0 && l.Step == 1 && !(l.LogpGap < 1e-3) {
					t.Errorf("step 1 rollout/trainer log-prob gap %g; both run the same weights at F32", l.LogpGap)
				}
			}
			if algo, _ := LookupAlgo(tc.algo); weighted != (algo.NLLAlpha > 0) {
				t.Errorf("NLL weights varied: %v; the algorithm has alpha %g", weighted, algo.NLLAlpha)
			}
			before, after := meanAcc(val[0]), meanAcc(val[1])
			t.Logf("%s: held-out accuracy %.3f -> %.3f", tc.algo, before, after)
			if after < before+tc.minGain {
				t.Errorf("held-out accuracy %.3f -> %.3f; want a gain of at least %g", before, after, tc.minGain)
			}
			ck, err := LatestCheckpoint(cfg.Out)
			if err != nil || ck == "" {
				t.Fatalf("no checkpoint: %v", err)
			}
			for i := range dirs {
				if _, err := os.Stat(filepath.Join(AgentCheckpointDir(ck, i), "model.gguf")); err != nil {
					t.Errorf("checkpoint lacks agent %d's GGUF: %v", i, err)
				}
				_, err := os.Stat(filepath.Join(AgentCheckpointDir(ck, i), peft.ConfigFile))
				if lora := tc.lora > 0; lora != (err == nil) {
					t.Errorf("LoRA %v, but agent %d's checkpoint has an adapter config: %v", lora, i, err == nil)
				}
			}
		})
	}
}

func TestBatchOrder(t *testing.T) {
	cfg := Config{Data: Data{Problems: make([]data.Problem, 10)}, Settings: Settings{BatchSize: 3, Seed: 5}}
	seen := map[int]bool{}
	for step := 1; step <= 3; step++ { // one epoch: 3 whole batches, one problem dropped
		for _, i := range cfg.batch(step) {
			if seen[i] {
				t.Errorf("problem %d twice in one epoch", i)
			}
			seen[i] = true
		}
	}
	if len(seen) != 9 {
		t.Errorf("an epoch covered %d problems, want 9", len(seen))
	}
	again := Config{Data: Data{Problems: make([]data.Problem, 10)}, Settings: Settings{BatchSize: 3, Seed: 5}}
	if a, b := cfg.batch(4), again.batch(4); a[0] != b[0] || a[1] != b[1] {
		t.Error("the same (seed, step) must give the same batch (resume depends on it)")
	}
	other := Config{Data: Data{Problems: make([]data.Problem, 10)}, Settings: Settings{BatchSize: 3, Seed: 6}}
	same := true
	for s := 1; s <= 3; s++ {
		a, b := cfg.batch(s), other.batch(s)
		for i := range a {
			same = same && a[i] == b[i]
		}
	}
	if same {
		t.Error("another seed must give another order")
	}
}

func TestReadPairs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		why, body string
		n         int
		wantErr   bool
	}{
		{"two pairs and a blank line", "{\"prompt\":\"a\",\"response\":\"b\"}\n\n{\"prompt\":\"c\",\"response\":\"d\"}\n", 2, false},
		{"missing response", "{\"prompt\":\"a\"}\n", 0, true},
		{"not JSON", "prompt: a\n", 0, true},
		{"empty file has no pairs", "", 0, true},
	} {
		p := filepath.Join(dir, "p.jsonl")
		os.WriteFile(p, []byte(tc.body), 0o644)
		got, err := ReadPairs(p)
		if (err != nil) != tc.wantErr || len(got) != tc.n {
			t.Errorf("%s: %d pairs, error %v", tc.why, len(got), err)
		}
	}
}
