package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/sharedtest"
)

// A tiny model can carry a real checkpoint's tokenizer and chat template end to end.
func TestModelTinyWithRealTokenizer(t *testing.T) {
	cases := []struct {
		dir, arch string
		family    chat.Family
		special   string
	}{
		{"Qwen2.5-3B-Instruct", "qwen2", chat.Qwen25, "<|im_start|>"},
		{"Llama-3.2-3B-Instruct", "llama", chat.Llama3, "<|start_header_id|>"},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), c.arch)
		app := App()
		app.Writer = &bytes.Buffer{}
		if err := app.Run([]string{"umad", "model", "tiny", "--arch", c.arch, "--tokenizer", sharedtest.Path(t, "tokenizers/"+c.dir), "--out", out}); err != nil {
			t.Fatal(err)
		}
		m, err := engine.LoadModel(filepath.Join(out, "model.gguf"), engine.ModelParams{})
		if err != nil {
			t.Fatal(err)
		}
		if m.NVocab() < 128000 {
			t.Errorf("%s: vocabulary of %d tokens, want the real one", c.dir, m.NVocab())
		}
		if toks, _ := m.Tokenize(c.special, false, true); len(toks) != 1 {
			t.Errorf("%s: %s is %v, want one token", c.dir, c.special, toks)
		}
		if f, err := chat.Detect(m.ChatTemplate()); err != nil || f.Family != c.family {
			t.Errorf("%s: chat format %v, %v", c.dir, f, err)
		}
		m.Close()
	}
}

// model tiny builds beside --out and renames into place: killed half-way (for memory, at
// --vocab 10000000) it left a model.gguf and an empty hf/, and the rerun was refused.
func TestModelTinyKilledLeavesNoOutput(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "tiny")
	cmd := umadProcess(t, 0, "model", "tiny", "--vocab", "200000", "--out", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Killed once the GGUF is written, while the safetensors file is.
	for {
		if m, _ := filepath.Glob(filepath.Join(parent, "*", "model.gguf")); len(m) > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("model tiny ended (%v) before its GGUF was seen", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	if err := <-done; err == nil {
		t.Fatal("model tiny finished before it was killed; the test needs a larger --vocab")
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the killed write left %s", out)
	}
	if _, stderr, err := runApp(t, "model", "tiny", "--out", out); err != nil {
		t.Fatalf("the rerun: %v\n%s", err, stderr)
	}
}

// --layers keeps a preset's per-layer shape with fewer layers, in both files; it needs a
// preset and a count within the preset's.
func TestModelTinyLayers(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m")
	if _, stderr, err := runApp(t, "model", "tiny", "--preset", "qwen2.5-0.5b", "--layers", "1", "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	g, err := gguf.OpenGGUF(filepath.Join(out, "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	layers, err1 := g.Uint("qwen2.block_count")
	width, err2 := g.Uint("qwen2.embedding_length")
	if err1 != nil || err2 != nil || layers != 1 || width != 896 {
		t.Errorf("the GGUF has %d layers of width %d (%v, %v), want 1 of 896", layers, width, err1, err2)
	}
	m, err := engine.LoadModel(filepath.Join(out, "model.gguf"), engine.ModelParams{})
	if err != nil {
		t.Fatalf("llama.cpp does not load the cut model: %v", err)
	}
	m.Close()
	cfg, err := os.ReadFile(filepath.Join(out, "hf", "config.json"))
	if err != nil || !bytes.Contains(cfg, []byte(`"num_hidden_layers": 1,`)) {
		t.Errorf("config.json does not say 1 layer (%v):\n%s", err, cfg)
	}
	for _, args := range [][]string{{"--layers", "2"}, {"--preset", "qwen2.5-0.5b", "--layers", "25"}, {"--preset", "qwen2.5-0.5b", "--layers", "-1"}} {
		if _, _, err := runApp(t, append([]string{"model", "tiny", "--out", filepath.Join(t.TempDir(), "x")}, args...)...); err == nil {
			t.Errorf("model tiny %v was accepted", args)
		}
	}
}

// Issue 44: --arch and a --preset of another architecture disagree; model tiny wrote the
// preset's model and ignored --arch. It is refused in one line, and nothing is written.
func TestModelTinyArchPresetDisagree(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tiny")
	_, _, err := runApp(t, "model", "tiny", "--arch", "qwen2", "--preset", "gemma-3-1b", "--layers", "1", "--out", out)
	if want := "--arch qwen2 and --preset gemma-3-1b (a gemma3 model) disagree"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %q", err, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the refused model tiny wrote %s", out)
	}
}
