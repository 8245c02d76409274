package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
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
		m, err := engine.LoadModel(filepath.Join(out, "model.gguf"), llama.ModelParams{})
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
