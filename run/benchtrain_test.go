package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/bench"
)

// A benchmark of no runs, steps or tokens is refused before anything loads, as are more
// runs than MaxBenchRuns; the errors name the flags.
func TestTrainBenchCheck(t *testing.T) {
	ok := TrainBench{Steps: 2, Batch: 2, G: 4, MaxTokens: 32, PromptLimit: 512, Runs: 3}
	if err := ok.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		edit func(*TrainBench)
		want string
	}{
		{func(b *TrainBench) { b.Runs = 0 }, "--runs must be at least 1, got 0"},
		{func(b *TrainBench) { b.Steps = 0 }, "--steps must be at least 1, got 0"},
		{func(b *TrainBench) { b.G = 0 }, "--g must be at least 1, got 0"},
		{func(b *TrainBench) { b.MaxTokens = -3 }, "--max-tokens must be at least 1, got -3"},
		{func(b *TrainBench) { b.PromptLimit = 0 }, "--prompt-limit must be at least 1, got 0"},
		{func(b *TrainBench) { b.Runs = MaxBenchRuns + 1 }, "--runs 101: at most 100"},
	} {
		b := ok
		c.edit(&b)
		if err := b.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", b, err, c.want)
		}
	}
}

// The run a benchmark starts trains its model into its directory at the step's size, with
// the settings handed on given and no others; a key train does not have is refused.
func TestTrainBenchRequest(t *testing.T) {
	b := TrainBench{Steps: 3, Batch: 2, G: 4, MaxTokens: 8, PromptLimit: 64, Runs: 1, Train: [][2]string{{"dtype", "bf16"}}}
	r, err := b.request("/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	if r.Agents[0] != "/tmp/x/hf" || r.Out != "/tmp/x/run" || r.Algo != "grpo" || r.Turns != 1 || r.Synthetic != 6 ||
		r.ValSynthetic != 0 || r.Steps != 3 || r.Agent.MaxTokens != 8 || r.PromptLimit != 64 || r.DType != "bf16" {
		t.Errorf("request: %+v", r)
	}
	if k := r.Keys(); !k.IsSet("dtype") || k.IsSet("gpu-layers") {
		t.Errorf("given: dtype %v, gpu-layers %v; want only the handed-on dtype", k.IsSet("dtype"), k.IsSet("gpu-layers"))
	}
	b.Train = [][2]string{{"nope", "1"}}
	if _, err := b.request("/tmp/x"); err == nil || !strings.Contains(err.Error(), "nope is no setting") {
		t.Errorf("unknown key: %v", err)
	}
}

// A profile goes only into a new or empty directory, and never beside --results (the
// profiler slows the step).
func TestStartProfile(t *testing.T) {
	t.Setenv(bench.ProfileEnv, "") // restored after the test, which sets it
	dir := t.TempDir()
	if err := startProfile(dir, "R.md"); err == nil || !strings.Contains(err.Error(), "cannot go to --results") {
		t.Errorf("with --results: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := startProfile(dir, ""); err == nil || !strings.Contains(err.Error(), "new or empty directory") {
		t.Errorf("non-empty directory: %v", err)
	}
	if err := startProfile("", "R.md"); err != nil || os.Getenv(bench.ProfileEnv) != "" {
		t.Errorf("no profile: %v, %s=%q", err, bench.ProfileEnv, os.Getenv(bench.ProfileEnv))
	}
	fresh := filepath.Join(dir, "new")
	if err := startProfile(fresh, ""); err != nil || os.Getenv(bench.ProfileEnv) != fresh {
		t.Errorf("new directory: %v, %s=%q, want %q", err, bench.ProfileEnv, os.Getenv(bench.ProfileEnv), fresh)
	}
}
