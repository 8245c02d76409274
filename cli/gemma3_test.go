package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// Gemma 3 end to end on a tiny model: a debate beside a Qwen2 agent, SFT, and two GRPO
// steps, each ending in a weight sync through the +1 norm offset that the probe check after
// the sync would catch if llama.cpp and the plugin disagreed.
func TestGemma3EndToEnd(t *testing.T) {
	dir := t.TempDir()
	g3 := testmodel.Tiny(t, "gemma3")
	debate := filepath.Join(dir, "debate")
	if _, stderr, err := runApp(t, "debate", "--agent", filepath.Join(g3, "model.gguf"), "--agent", testmodel.GGUF(t, "qwen2"),
		"--data", sharedData(t, "gsm8k/test.jsonl"), "--limit", "2", "-k", "2", "--turns", "2", "--max-tokens", "16",
		"--prompt-limit", "1200", "--threads", "1", "--slots", "4", "--out", debate); err != nil {
		t.Fatalf("debate: %v\n%s", err, stderr)
	}
	if recs := readRecords(t, filepath.Join(debate, "seed-1", "rollouts.jsonl.zst")); len(recs) != 2 {
		t.Errorf("debate: %d records, want 2", len(recs))
	}
	sft := filepath.Join(dir, "sft")
	if _, stderr, err := runApp(t, "sft", "--model", filepath.Join(g3, "hf"), "--synthetic", "8", "--batch", "4",
		"--epochs", "1", "--torch-threads", "1", "--out", sft); err != nil {
		t.Fatalf("sft: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(sft, "model.gguf")); err != nil {
		t.Errorf("sft wrote no GGUF: %v", err)
	}
	run := filepath.Join(dir, "train")
	if _, stderr, err := runApp(t, "train", "--agent", filepath.Join(g3, "hf"), "--algo", "grpo", "--turns", "1",
		"--synthetic", "8", "--batch", "2", "-g", "2", "--max-tokens", "8", "--prompt-limit", "512",
		"--val-synthetic", "2", "--steps", "2", "--threads", "1", "--torch-threads", "1",
		"--kv-type", "f32", "--flash-attn", "off", "--slots", "4", "--out", run); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if ts, _ := stepsOf(readRun(t, run)); len(ts) != 2 {
		t.Errorf("train logged steps %v, want 2", ts)
	}
}

// Issue 44: with query_pre_attn_scalar missing, both engines use transformers' default of
// 256. llama.cpp has no key for it: hf2gguf folds it into the q-norm weights, and gguf2hf
// takes it back out. On the tiny Gemma 3 (head_dim 32) llama.cpp's log-probs agree with
// the plugin's within its GeLU-table tolerance (1e-3), far from head_dim's scaling, and
// the round trip restores the key and the weights.
func TestGemma3QueryScalarInGGUF(t *testing.T) {
	rt := torchtest.Open(t)
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	if err := os.CopyFS(hf, os.DirFS(filepath.Join(testmodel.Tiny(t, "gemma3"), "hf"))); err != nil {
		t.Fatal(err)
	}
	editJSON(t, filepath.Join(hf, "config.json"), func(m map[string]any) { delete(m, "query_pre_attn_scalar") })
	headDim := filepath.Join(dir, "head-dim")
	if err := os.CopyFS(headDim, os.DirFS(hf)); err != nil {
		t.Fatal(err)
	}
	editJSON(t, filepath.Join(headDim, "config.json"), func(m map[string]any) { m["query_pre_attn_scalar"] = m["head_dim"] })
	gguf, back := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "back")
	if _, _, err := runApp(t, "convert", "hf2gguf", hf, gguf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, "convert", "gguf2hf", gguf, back); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	readJSON(t, filepath.Join(back, "config.json"), &cfg)
	if cfg["query_pre_attn_scalar"] != float64(256) {
		t.Errorf("gguf2hf wrote query_pre_attn_scalar %v, want 256", cfg["query_pre_attn_scalar"])
	}
	prompts := [][]int32{{2, 17, 40, 9, 33, 5, 71, 12, 8, 3}}
	responses := [][]int32{{44, 6, 90, 13, 27, 61, 7, 18, 52, 11, 30, 4, 99, 15}}
	score := func(dir string) []float32 {
		m, err := hfmodel.Load(rt, dir, torch.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		lp, _, err := m.LogProbs(prompts, responses, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lp[0]
	}
	plugin, plain, roundTrip := score(hf), score(headDim), score(back)
	opt, err := engine.ParseOptions(0, 0, 1, "f32", "off")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := engine.OpenScorer(gguf, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Free()
	lp, _, err := sc.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	var llama, headGap, tripGap float64
	for j := range plugin {
		llama = max(llama, math.Abs(float64(lp[0][j]-plugin[j])))
		headGap = max(headGap, math.Abs(float64(plain[j]-plugin[j])))
		tripGap = max(tripGap, math.Abs(float64(roundTrip[j]-plugin[j])))
	}
	t.Logf("llama.cpp vs plugin %.2g, head_dim scaling vs plugin %.2g, round trip %.2g", llama, headGap, tripGap)
	if llama > 1e-3 || headGap < 1e-2 || tripGap > 1e-5 {
		t.Errorf("llama.cpp %g from the plugin (want <= 1e-3), head_dim scaling %g (want > 0.01), round trip %g (want <= 1e-5)", llama, headGap, tripGap)
	}
}

func editJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	var m map[string]any
	readJSON(t, path, &m)
	edit(m)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}
