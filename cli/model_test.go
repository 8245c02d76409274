package cli

import (
	"bytes"
	"path/filepath"
	"testing"

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
