package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// Benchmark flags that measure nothing, or that the chosen mode ignores, are refused
// before any model is generated or loaded.
func TestBenchFlagErrors(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	small := []string{"bench", "rollout", "--big-vocab", "0", "-k", "2", "--max-tokens", "2", "--prompt-tokens", "4"}
	debate := []string{"bench", "debate", "--synthetic", "2", "-k", "1", "--turns", "1", "--max-tokens", "2", "--repeats", "1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(debate, "--synthetic", "0"), "--synthetic must be at least 1, got 0"},
		{append(debate, "--turns", "0"), "--turns must be at least 1, got 0"},
		{append(debate, "--agent", gguf, "--two-models"), "--two-models is for the generated models; it does nothing with --agent"},
		{append(debate, "--threads", "-1"), "--threads must be 0"},
		{append(small, "--repeats", "0"), "--repeats must be at least 1, got 0"},
		{append(small, "--threads", "-1"), "--threads must be 0"},
		{append(small, "--big-vocab", "-5"), "--big-vocab must be 0 (skip) or a vocabulary size, got -5"},
		{append(small, "--preset", "gpt5"), `unknown preset "gpt5"`},
		{[]string{"bench", "rollout", "--model", gguf, "--preset", "gpt5"}, "--preset is for the generated models; it does nothing with --model"},
		{[]string{"bench", "train", "--preset", "gpt5"}, `unknown preset "gpt5"`},
		{[]string{"bench", "train", "--layers", "2"}, "--layers 2: want 1 to a --preset's layer count"},
		{[]string{"bench", "train", "--preset", "qwen2.5-0.5b", "--layers", "25"}, "--layers 25: want 1 to a --preset's layer count"},
		{[]string{"bench", "train", "--preset", "qwen2.5-0.5b", "--layers", "-1"}, "--layers -1: want 1 to a --preset's layer count"},
		{[]string{"bench", "train", "--steps", "0"}, "--steps must be at least 1, got 0"},
		{[]string{"bench", "train", "--runs", "0"}, "--runs must be at least 1, got 0"},
		{[]string{"bench", "train", "--runs", "1000000000"}, "--runs 1000000000: at most 100"},
		{[]string{"bench", "train", "-g", "0"}, "--g must be at least 1, got 0"},
		{[]string{"bench", "train", "--max-tokens", "-3"}, "--max-tokens must be at least 1, got -3"},
		{[]string{"bench", "train", "--threads", "-1"}, "--threads must be 0"},
		{[]string{"bench", "train", "--gpu-layers", "-1"}, "--gpu-layers must be 0 or more, got -1"},
		{[]string{"bench", "train", "--dtype", "f8"}, "--dtype"},
	} {
		_, _, err := runApp(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tc.args[1:], err, tc.want)
		}
	}
}

// A real step at the tiny shape, run twice, prints every phase with a positive time, the
// libtorch phases' positive shares of the matmul peak, decoding's share of its bound and
// the peak memory against the plan, each figure as min / median / max (or one figure where
// the runs agree); --results gets the same section.
func TestBenchTrain(t *testing.T) {
	if !torchtest.Open(t).CUDAAvailable() {
		_, _, err := runApp(t, "bench", "train", "--gpu-layers", "1")
		if want := "--gpu-layers: the GPU's bandwidth is measured through the torch plugin, which cannot use the GPU"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("--gpu-layers without a GPU the plugin sees: %v, want %q", err, want)
		}
	}
	results := filepath.Join(t.TempDir(), "RESULTS.md")
	out, stderr, err := runApp(t, "bench", "train", "--runs", "2", "--threads", "1", "--torch-threads", "1", "--max-tokens", "8", "--results", results)
	if err != nil {
		t.Fatalf("bench train: %v\n%s", err, stderr)
	}
	positive := func(what, s string) {
		if v, err := strconv.ParseFloat(s, 64); err != nil || !(v > 0) {
			t.Errorf("%s: %q is not positive\n%s", what, s, out)
		}
	}
	num := `([0-9.]+(?:e[-+][0-9]+)?)`
	// spread is a figure with its unit, alone or as min / median / max; it captures the min.
	spread := func(unit string) string {
		one := `[0-9.]+(?:e[-+][0-9]+)?` + unit
		return num + unit + `(?: / ` + one + ` / ` + one + `)?`
	}
	for _, phase := range []string{"rollout", "log-probs", "reference", "update", "sync", "step"} {
		m := regexp.MustCompile(`(?m)^\| ` + phase + ` \| ` + spread("") + ` \|`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no %s row\n%s", phase, out)
			continue
		}
		positive(phase+" seconds", m[1])
	}
	for _, phase := range []string{"log-probs", "reference", "update"} {
		m := regexp.MustCompile(`(?m)^\| ` + phase + ` \|.*\| ` + spread(` [kMGT]?FLOP/s`) + ` \| ` + spread("%") + ` \|`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no FLOP/s and share of peak in the %s row\n%s", phase, out)
			continue
		}
		positive(phase+" FLOP/s", m[1])
		positive(phase+" share of peak", m[2])
	}
	for what, re := range map[string]string{
		"matmul peak":      `matmul peak: ` + spread(` [kMGT]?FLOP/s`) + ` \(libtorch, [0-9]+ x [0-9]+ by [0-9]+ x [0-9]+, the best of the step's [0-9]+ products, f32`,
		"bandwidth":        `memory bandwidth: ` + spread(` [kMGT]?B/s`) + ` \(a STREAM-style triad`,
		"decode bytes/s":   `rollout decode: [0-9 /]+ tok/s, ` + spread(` [kMGT]?B/s`) + ` of weights`,
		"decode bound":     `sequences\), ` + spread("%") + ` of the (?:bandwidth|compute) bound`,
		"peak RSS to plan": `peak RSS: .* against the plan's .*: ` + num + `x`,
		"prompt tokens":    `[0-9]+ response and ([0-9]+) prompt tokens`,
		"runs":             `min / median / max over ([0-9]+) runs`,
	} {
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no %s line\n%s", what, out)
			continue
		}
		positive(what, m[1])
	}
	b, err := os.ReadFile(results)
	if err != nil || !strings.Contains(string(b), "<!-- train:begin -->\n"+strings.TrimSpace(out)+"\n<!-- train:end -->") {
		t.Errorf("--results: %v\n%s", err, b)
	}
}

// --profile traces the real plugin's calls (in a child process: the plugin reads where
// to, once, at its first traced call) and prints the last step's time by op.
func TestBenchTrainProfile(t *testing.T) {
	torchtest.Open(t)
	dir := filepath.Join(t.TempDir(), "profile")
	if _, _, err := runApp(t, "bench", "train", "--profile", dir, "--results", filepath.Join(dir, "R.md")); err == nil || !strings.Contains(err.Error(), "cannot go to --results") {
		t.Errorf("--profile with --results: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, "bench", "train", "--profile", dir); err == nil || !strings.Contains(err.Error(), "new or empty directory") {
		t.Errorf("--profile into a directory with files: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "old.json")); err != nil {
		t.Fatal(err)
	}
	cmd := umadProcess(t, 0, "bench", "train", "--runs", "1", "--threads", "1", "--torch-threads", "1", "--max-tokens", "8", "--profile", dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench train --profile: %v\n%s", err, out)
	}
	for _, phase := range []string{"log-probs", "update"} {
		table := regexp.MustCompile(`(?s)\n` + phase + `: \d+ calls, [0-9.]+ s .*?\n\n(.*?)(\n\n|$)`).FindStringSubmatch(string(out))
		if table == nil {
			t.Errorf("no %s profile\n%s", phase, out)
			continue
		}
		if !strings.Contains(table[1], "| aten::mm |") || !strings.Contains(table[1], "| outside every op |") {
			t.Errorf("%s profile without matrix products or the untraced time:\n%s", phase, table[1])
		}
	}
	traces, err := filepath.Glob(filepath.Join(dir, "*-optim_step.json"))
	if err != nil || len(traces) != 2 { // --steps 2
		t.Errorf("optimizer step traces: %v %v", traces, err)
	}
}
