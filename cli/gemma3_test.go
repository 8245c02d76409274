package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
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
