package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
)

// `umad sft --synthetic` teaches a tiny model the boxed answer format: the loss falls, and
// out/ gets an HF checkpoint without optimizer state (a warm start is a starting point)
// and a GGUF that llama.cpp loads, together, with nothing left beside it.
func TestSFTSynthetic(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "sft")
	// 16 pairs, 4 per step, 6 epochs: 24 AdamW steps, enough at lr 3e-3 for a random
	// hidden-64 model to learn a large part of the fixed format.
	src := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	stdout, stderr, err := runApp(t, "sft", "--model", src, "--synthetic", "16",
		"--batch", "4", "--epochs", "6", "--lr", "3e-3", "--torch-threads", "1", "--out", out)
	if err != nil {
		t.Fatalf("sft: %v\n%s", err, stderr)
	}
	var pairs, steps int
	var first, last float64
	line := stdout[strings.Index(stdout, "sft:"):]
	if _, err := fmt.Sscanf(line, "sft: %d pairs, %d steps, loss %g -> %g", &pairs, &steps, &first, &last); err != nil {
		t.Fatalf("summary line %q: %v", stdout, err)
	}
	if pairs != 16 || steps != 24 {
		t.Errorf("%d pairs in %d steps, want 16 in 24", pairs, steps)
	}
	// Measured: 5.9 -> 1.4 (first and last epoch means). A model that does not learn stays
	// within noise of the first epoch's mean; half of it is far outside.
	if !(last < first/2) {
		t.Errorf("loss %g -> %g: want it at least halved", first, last)
	}
	for _, f := range append([]string{"config.json", "model.safetensors"}, model.TokenizerFiles...) {
		_, inSrc := os.Stat(filepath.Join(src, f))
		if _, err := os.Stat(filepath.Join(out, "hf", f)); inSrc == nil && err != nil {
			t.Errorf("hf/ lacks %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "hf", hfmodel.OptimizerFile)); err == nil {
		t.Errorf("hf/ holds %s; a warm start must start training with fresh moments", hfmodel.OptimizerFile)
	}
	m, err := engine.OpenVocab(filepath.Join(out, "model.gguf"))
	if err != nil {
		t.Fatalf("model.gguf: %v", err)
	}
	m.Close()
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("beside out: %d entries, want only out (no temporary directory)", len(entries))
	}

	// An existing out is refused before any work.
	if _, _, err := runApp(t, "sft", "--model", filepath.Join(out, "hf"), "--synthetic", "4", "--out", out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("sft into an existing directory: %v", err)
	}
}
