package cli

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/trainer"
)

// peftOn writes a rank-4 adapter on q, v and down for the HF base (named in its config
// when name is set), with small random A and B, and returns its directory.
func peftOn(t *testing.T, base string, name bool) string {
	t.Helper()
	hc, err := model.LoadHFConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	s, err := hc.Shape()
	if err != nil {
		t.Fatal(err)
	}
	cfg := peft.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj", "down_proj"}}
	if name {
		cfg.BaseModel = base
	}
	a, err := peft.NewLoRAAdapter(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range a.Keys() {
		for _, v := range [][]float32{a.Pairs[k].A, a.Pairs[k].B} {
			for i := range v {
				v[i] = float32(0.05 * rng.NormFloat64())
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := a.WritePEFT(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// trainFrom is trainArgs with agent as the --agent value.
func trainFrom(t *testing.T, agent, out string, extra ...string) []string {
	args := trainArgs(t, out, "1", append([]string{"--val-synthetic", "0", "--lr", "1e-2"}, extra...)...)
	args[2] = agent
	return args
}

// `--agent PEFT_DIR` starts a LoRA run from the adapter on the base it names, with its rank,
// alpha and targets: the first sync's probe check (llama.cpp base + adapter GGUF vs the
// plugin, f32 rollout weights for an exact check) passes, and the step-1 adapter is the
// imported one moved by one AdamW step.
func TestTrainFromAdapter(t *testing.T) {
	base := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	peftDir := peftOn(t, base, true)
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainFrom(t, peftDir, out, "--probe-tol", "1e-5", "--rollout-dtype", "f32")...); err != nil {
		t.Fatalf("train from %s: %v\n%s", peftDir, err, stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "config.json"))
	for _, want := range []string{`"rank": 4`, `"alpha": 8`, `"adapter": "` + peftDir + `"`, `"model": "` + base + `"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.json lacks %s:\n%s", want, b)
		}
	}
	start, err := peft.Read(peftDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := peft.Read(trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000001"), 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.BaseModel != base || len(got.Pairs) != len(start.Pairs) {
		t.Fatalf("the checkpoint's adapter names %s with %d pairs; want %s with %d", got.BaseModel, len(got.Pairs), base, len(start.Pairs))
	}
	moved := 0.0
	for k, p := range start.Pairs {
		for i, v := range p.A {
			moved = math.Max(moved, math.Abs(float64(got.Pairs[k].A[i]-v)))
		}
	}
	// AdamW moves each value by about the learning rate (1e-2) per step; fresh adapters
	// would differ by the width of their random initialisation.
	if !(moved > 0 && moved < 0.02) {
		t.Errorf("the step-1 adapter moved up to %g from the imported one; want one AdamW step of 1e-2", moved)
	}
}

// An adapter that does not fit the run is refused with one line, before anything loads
// and without leaving a run directory.
func TestTrainFromAdapterRefusals(t *testing.T) {
	base := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	peftDir, unnamed := peftOn(t, base, true), peftOn(t, base, false)
	copied := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copied, os.DirFS(base)); err != nil {
		t.Fatal(err)
	}
	qwen3 := filepath.Join(testmodel.Tiny(t, "qwen3"), "hf")
	for _, tc := range []struct {
		why   string
		agent string
		extra []string
		want  []string
	}{
		{"other rank", peftDir, []string{"--lora-rank", "8"}, []string{"rank 4", "asks for rank 8"}},
		{"other targets", peftDir, []string{"--lora-rank", "4", "--lora-targets", "q,v"}, []string{"targets q,v,down", "asks for rank 4, alpha 8, targets q,v "}},
		{"other base than the adapter's", copied + ",adapter=" + peftDir, nil, []string{"was trained on " + base, "not on " + copied}},
		{"base of other shapes", qwen3 + ",adapter=" + unnamed, nil, []string{"does not fit the base " + qwen3}},
		{"adapter naming no base", unnamed, nil, []string{"names no base", "--agent BASE_DIR,adapter="}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			_, _, err := runApp(t, trainFrom(t, tc.agent, out, tc.extra...)...)
			if err == nil {
				t.Fatal("the run started")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused run left its directory")
			}
		})
	}
	// The adapter's own base given explicitly is accepted (a dry run plans it).
	if _, stderr, err := runApp(t, trainFrom(t, base+",adapter="+unnamed, filepath.Join(t.TempDir(), "run"), "--dry-run")...); err != nil {
		t.Errorf("--agent BASE,adapter=PEFT: %v\n%s", err, stderr)
	}
	// Dropout and the base's type are the run's choice, also without --lora-rank; without
	// an adapter either they have nothing to apply to.
	if _, stderr, err := runApp(t, trainFrom(t, peftDir, filepath.Join(t.TempDir(), "run"), "--dry-run", "--lora-dropout", "0.1", "--lora-bf16-base")...); err != nil {
		t.Errorf("--lora-dropout and --lora-bf16-base with an adapter: %v\n%s", err, stderr)
	}
	if _, _, err := runApp(t, trainFrom(t, base, filepath.Join(t.TempDir(), "run"), "--dry-run", "--lora-dropout", "0.1")...); err == nil ||
		!strings.Contains(err.Error(), "--lora-dropout needs --lora-rank or an agent that starts from a PEFT adapter") {
		t.Errorf("--lora-dropout on a full fine-tuning run: %v", err)
	}
}
