package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// bench rollout without a model measures the generated tiny qwen2 and, as asked, one of a
// bigger vocabulary; its section is printed and goes into the results file.
func TestRolloutRunGeneratesModels(t *testing.T) {
	results := filepath.Join(t.TempDir(), "RESULTS.md")
	var out bytes.Buffer
	r := RolloutRun{K: 2, MaxTokens: 2, PromptTokens: 4, BigVocab: 1000, BigBatch: 2, Threads: 1, Repeats: 1,
		Report: Report{Command: "bench rollout", Results: results, Section: "rollout"}}
	if err := r.Run(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "\n| tiny qwen2 |") || !strings.Contains(s, "\n| tiny qwen2, vocab 1000 |") || !strings.Contains(s, "`umad bench rollout`") {
		t.Errorf("section:\n%s", s)
	}
	if raw, err := os.ReadFile(results); err != nil || !strings.Contains(string(raw), strings.TrimSpace(s)) {
		t.Errorf("results file: %v\n%s", err, raw)
	}
}

// bench debate labels given agents by their paths, and generated ones by their seeds: two
// agents on one model, or on one each.
func TestDebateRunLabels(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	cfg := DebateConfig{Problems: 1, K: 1, Turns: 1, MaxTokens: 2, PromptLimit: 400, Slots: 2, Threads: 1, Repeats: 1}
	for _, tc := range []struct {
		agents    []string
		twoModels bool
		want      []string
	}{
		{[]string{gguf, gguf}, false, []string{"| " + gguf + " |"}},
		{nil, false, []string{"| tiny qwen2 (seed 1) |"}},
		{nil, true, []string{"| tiny qwen2 (seed 1) |", "| tiny qwen2 (seed 2) |"}},
	} {
		var out bytes.Buffer
		cfg.Agents = tc.agents
		if err := (DebateRun{DebateConfig: cfg, TwoModels: tc.twoModels}).Run(&out); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out.String(), "\n| tiny qwen2") + strings.Count(out.String(), "\n| "+gguf); got != len(tc.want) {
			t.Errorf("%v, two models %v: %d model rows, want %d\n%s", tc.agents, tc.twoModels, got, len(tc.want), out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), "\n"+w) {
				t.Errorf("%v, two models %v: no row %q\n%s", tc.agents, tc.twoModels, w, out.String())
			}
		}
	}
}
