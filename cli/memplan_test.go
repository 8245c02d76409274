package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/memplan"
)

// --dry-run prints the plan on stdout and leaves --out alone.
func TestTrainDryRun(t *testing.T) {
	torchtest.Open(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := runApp(t, trainArgs(t, out, "1", "--dry-run")...)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	for _, want := range []string{"memory plan", "trainer weights (f32)", "reference model", "activations (4 seqs x 520 tokens)",
		"KV cache (4 x 520, f32)", "process (Go, libtorch, llama.cpp)", "peak host:", "MemAvailable"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the dry run touched %s (%v)", out, err)
	}
}

// A LoRA run is planned as one: a frozen base and adapters, no reference model, and
// advice that never offers LoRA to it.
func TestTrainDryRunLoRA(t *testing.T) {
	torchtest.Open(t)
	out := filepath.Join(t.TempDir(), "run")
	args := trainArgs(t, out, "1", "--dry-run", "--lora-rank", "4", "--lora-targets", "q,v", "--lora-bf16-base",
		"--memory-budget", "270MiB") // short for both attentions, as in TestTrainRefusedWhenTooBig
	stdout, _, err := runApp(t, args...)
	if err == nil || !strings.HasPrefix(err.Error(), "memory plan: the run needs") {
		t.Fatalf("dry run over a 270 MiB budget: %v; want the plan's refusal", err)
	}
	for _, want := range []string{"base weights (bf16, frozen)", "LoRA adapters (rank 4, f32)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the LoRA dry run lacks %q:\n%s", want, stdout)
		}
	}
	for _, bad := range []string{"reference model", "trainer weights", "--lora-rank 16"} {
		if strings.Contains(stdout+err.Error(), bad) {
			t.Errorf("the LoRA dry run shows %q:\n%s\n%v", bad, stdout, err)
		}
	}
}

// A run that does not fit is refused with the table and one line of advice, before
// anything is loaded or written; --no-memory-check starts it anyway.
func TestTrainRefusedWhenTooBig(t *testing.T) {
	torchtest.Open(t)
	out := filepath.Join(t.TempDir(), "run")
	// 270 MiB is short for both attentions: the plan peaks at 333 MiB with libtorch 1.13's
	// L x L scores and at 291 MiB with 2.x's fused attention.
	_, stderr, err := runApp(t, trainArgs(t, out, "1", "--memory-budget", "270MiB")...)
	if err == nil || !strings.HasPrefix(err.Error(), "memory plan: the run needs") || !strings.Contains(err.Error(), "--no-memory-check") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("a plan over a 270 MiB budget: %v; want one line of advice", err)
	}
	if !strings.Contains(stderr, "does not fit") || !strings.Contains(stderr, "trainer weights") {
		t.Errorf("the refusal does not show the plan:\n%s", stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused run touched %s (%v)", out, err)
	}

	// The qwen2.5-3b shape with 256 slots per agent (llama.cpp's most): only config.json is
	// read before the refusal, so no 3B weights need to exist.
	dir := t.TempDir()
	cfg := `{"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008,
		"num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2, "max_position_embeddings": 32768,
		"rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--agent", dir, "--agent", dir, "--algo", "ippo", "--turns", "1", "--synthetic", "16", "--batch", "4",
		"--slots", "256", "--grad-checkpoint", "--out", out}
	_, stderr, err = runApp(t, args...)
	if err == nil || !strings.Contains(err.Error(), "--slots 128 (-") || !strings.Contains(err.Error(), "--prompt-limit 2560 (-") {
		t.Fatalf("two 3B agents with 256 slots: %v\n%s; want fewer slots and a shorter prompt limit advised", err, stderr)
	}
	if strings.Count(stderr, "agent 1") != 1 || !strings.Contains(stderr, "KV cache (256 x 7168, f16)") {
		t.Errorf("the table does not plan both agents:\n%s", stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused run touched %s (%v)", out, err)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "1", "--dry-run", "--memory-budget", "270MiB", "--no-memory-check")...); err != nil {
		t.Errorf("a dry run that does not fit should still exit 0: %v", err)
	}
}

// --dry-run fails where the run would before loading, so that a script can rely on it
// (issue 28): a plan that does not fit, slots llama.cpp cannot run, an --out that the run
// would refuse. It still touches nothing.
func TestTrainDryRunFailsAsTheRunWould(t *testing.T) {
	torchtest.Open(t)
	holding, busy := t.TempDir(), t.TempDir()
	for dir, f := range map[string]string{holding: "config.json", busy: "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh := filepath.Join(t.TempDir(), "run")
	for _, tc := range []struct {
		out   string
		extra []string
		want  string
	}{
		{fresh, []string{"--memory-budget", "270MiB"}, "memory plan: the run needs"},
		{fresh, []string{"--slots", "300"}, "--slots: 300 slots"},
		{fresh, []string{"--resume"}, "holds no training run"},
		{holding, nil, "holds a training run; pass --resume"},
		{busy, nil, "is not empty and holds no run"},
	} {
		_, _, err := runApp(t, trainArgs(t, tc.out, "1", append([]string{"--dry-run"}, tc.extra...)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dry run %v on %s: %v; want an error saying %q", tc.extra, tc.out, err, tc.want)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a dry run touched %s (%v)", fresh, err)
	}
}

var (
	peakLine    = regexp.MustCompile(`peak host: ([0-9.]+ [KMG]iB)`)
	peakRSSLine = regexp.MustCompile(`peak host memory: ([0-9.]+ [KMG]iB)`)
)

// The plan against a real run: the peak RSS of `umad train --steps 1` on a tiny model with
// Qwen's 151,936-token vocabulary (9.8M parameters, so the model's lines are most of what
// is above the process baseline). The tolerance is 0.8-1.25x the plan: the
// baseline (Go, libtorch with its BLAS and OpenMP, llama.cpp) is a constant measured on
// one machine and one libtorch build; glibc's malloc and Go's collector keep freed memory
// for a while, which at this size is a visible share (five runs here measured 1.03-1.16x the
// plan); and the activations are planned for sequences at the prompt limit and the token
// limit, which real ones do not reach. So this checks the plan as a whole and the baseline
// constant (38% of this plan); memplan's unit tests check each line by hand. --dtype bf16
// is checked the same way: its masters, bf16 reference and halved activations.
func TestPlanMatchesPeakRSS(t *testing.T) {
	torchtest.Open(t)
	for _, dtype := range []string{"f32", "bf16"} {
		t.Run(dtype, func(t *testing.T) { checkPlanAgainstRSS(t, "--dtype", dtype) })
	}
}

func checkPlanAgainstRSS(t *testing.T, extra ...string) {
	out := filepath.Join(t.TempDir(), "run")
	args := trainArgs(t, out, "1", extra...)
	args[2] = filepath.Join(testmodel.TinyVocab(t, "qwen2", 151936), "hf")
	cmd := umadProcess(t, 0, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr.String())
	}
	m := peakLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("the run did not print its memory plan:\n%s", stderr.String())
	}
	plan, err := memplan.ParseSize(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// The run's own high-water mark: wait4's Maxrss would also count the test process,
	// whose memory the child shared until its exec (Go forks with CLONE_VM).
	m = peakRSSLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("the run did not print its peak memory:\n%s", stderr.String())
	}
	peak, err := memplan.ParseSize(m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("planned %s, peak RSS %s (%.2fx)", memplan.Size(plan), memplan.Size(peak), float64(peak)/float64(plan))
	if float64(peak) > 1.25*float64(plan) || float64(peak) < 0.8*float64(plan) {
		t.Errorf("peak RSS %s is not within 0.8-1.25x the planned %s", memplan.Size(peak), memplan.Size(plan))
	}
}

// A dry run of several ranks prints each placement's figures per rank and names the
// cheapest that fits; --shard refuses unknown stages and stage 3 where it cannot run in one
// line, and runs stage 0 with a warning in one process (issue 32).
func TestTrainDryRunPerRank(t *testing.T) {
	torchtest.Open(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout, stderr, err := runApp(t, trainArgs(t, out, "1", "--dry-run", "--nproc", "2")...)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	for _, want := range []string{"per rank of 2, each placement", "--shard 1 ", "--shard 3 --offload optimizer",
		"cheapest placement that fits 2 ranks: --shard 0 (busiest rank: GPU 0.0 KiB, host "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	// The run's own table is one rank's under its stage.
	stdout, stderr, err = runApp(t, trainArgs(t, out, "1", "--dry-run", "--nproc", "2", "--shard", "1")...)
	if err != nil || !strings.Contains(stdout, "AdamW moments (2 x f32, 1/2)") || strings.Contains(stdout, "until sharded") {
		t.Errorf("--shard 1 --nproc 2: %v\n%s%s", err, stdout, stderr)
	}
	for _, c := range []struct {
		shard, nproc, err string
		extra             []string
	}{
		{"4", "2", "--shard 4: the ZeRO stage is 0, 1, 2 or 3", nil},
		{"3", "2", "--shard 3 needs --grad-checkpoint", nil},
		{"3", "2", "--shard 3 shards the weights of full fine-tuning", []string{"--grad-checkpoint", "--lora-rank", "4"}},
	} {
		_, _, err := runApp(t, trainArgs(t, out, "1", append([]string{"--dry-run", "--nproc", c.nproc, "--shard", c.shard}, c.extra...)...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--shard %s --nproc %s: %v; want one line %q", c.shard, c.nproc, err, c.err)
		}
	}
	// --agent-ranks: one group per agent, no overlap, no idle rank, several processes.
	second := []string{"--agent", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), "--algo", "umad", "--turns", "2", "--dry-run"}
	for _, c := range []struct{ nproc, groups, err string }{
		{"2", "0,1,1", "--agent-ranks: 3 groups of ranks for 2 agents"},
		{"2", "0-1,1", "--agent-ranks: rank 1 is in the groups of agents 0 and 1"},
		{"3", "0,1", "--agent-ranks: rank 2 trains no agent"},
		{"2", "0,2", "--agent-ranks \"0,2\": rank 2 is outside the job's 2 ranks"},
		{"2", "0,x", "--agent-ranks \"0,x\": \"x\" is not a rank"},
		{"1", "0,1", "--agent-ranks needs several processes"},
	} {
		_, _, err := runApp(t, trainArgs(t, out, "1", append(second, "--nproc", c.nproc, "--agent-ranks", c.groups)...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--nproc %s --agent-ranks %s: %v; want one line %q", c.nproc, c.groups, err, c.err)
		}
	}
	// A rank of a group plans its own agent's training and every agent's rollouts.
	stdout, stderr, err = runApp(t, trainArgs(t, out, "1", append(second, "--nproc", "2", "--agent-ranks", "0,1")...)...)
	if err != nil || strings.Count(stdout, "AdamW moments") != 1 {
		t.Errorf("--agent-ranks 0,1: %v\n%s%s", err, stdout, stderr)
	}
	// --offload optimizer: the moments are planned in host memory; on the CPU a warning.
	stdout, stderr, err = runApp(t, trainArgs(t, out, "1", "--dry-run", "--offload", "optimizer")...)
	if err != nil || !strings.Contains(stdout, "AdamW moments (2 x f32, host)") ||
		!strings.Contains(stderr, "warning: --offload optimizer on the CPU") {
		t.Errorf("--offload optimizer: %v\n%s%s", err, stdout, stderr)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "1", "--dry-run", "--offload", "weights")...); err == nil ||
		!strings.HasPrefix(err.Error(), `--offload "weights": only optimizer`) {
		t.Errorf("--offload weights: %v", err)
	}
	_, stderr, err = runApp(t, trainArgs(t, out, "1", "--dry-run", "--shard", "3")...)
	if err != nil || !strings.Contains(stderr, "warning: --shard 3 with one process: nothing to shard; running as stage 0") {
		t.Errorf("--shard 3 in one process: %v, stderr:\n%s", err, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the dry runs touched %s (%v)", out, err)
	}
}
