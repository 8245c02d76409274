package llama_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
)

// Long runs of one character class crashed llama.cpp's std::regex pre-tokenizer with a
// stack overflow (SIGSEGV) from about 30,000 letters on: Qwen2's splitter recurses once per
// character. Every run up to the limit must tokenize (the fidelity tests check that the
// same path still gives the reference ids), and a longer text is refused.
func TestTokenizeLongRuns(t *testing.T) {
	paths := map[string]string{"tiny qwen2": testmodel.GGUF(t, "qwen2")}
	for _, c := range fidelityCases {
		out := filepath.Join(t.TempDir(), "m.gguf")
		if err := model.HFToGGUF(tinyHF(t, c), out, model.HFToGGUFOptions{}); err != nil {
			t.Fatal(err)
		}
		paths[c.dir] = out
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			m, err := llama.LoadModel(path, llama.ModelParams{VocabOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			runs := []string{strings.Repeat("x", 100_000), strings.Repeat("!", 100_000), strings.Repeat(" ", 100_000), strings.Repeat("中", 40_000)}
			if name == "tiny qwen2" || name == "Qwen2.5-3B-Instruct" {
				runs = append(runs, strings.Repeat("x", 1_000_000))
			}
			for _, run := range runs {
				got, err := m.Tokenize(run, false, false)
				if err != nil {
					t.Fatalf("%q x %d bytes: %v", run[:1], len(run), err)
				}
				back, err := m.Detokenize(got, false)
				if err != nil || back != run {
					t.Errorf("%q x %d bytes: %d tokens do not detokenize to the text (%v)", run[:1], len(run), len(got), err)
				}
				// A word after the run is split off as it is after a short run.
				tail, err := m.Tokenize(run+" 7 done", false, false)
				if err != nil {
					t.Fatal(err)
				}
				alone, _ := m.Tokenize(" 7 done", false, false)
				if run[0] != ' ' && !slices.Equal(tail, append(got, alone...)) {
					t.Errorf("%q x %d bytes: the run followed by a word tokenizes differently from the two apart", run[:1], len(run))
				}
			}
			_, err = m.Tokenize(strings.Repeat("x", llama.MaxTokenizeBytes+1), false, false)
			if err == nil || !strings.Contains(err.Error(), "longer than") {
				t.Errorf("a text over the limit: got %v, want a refusal", err)
			}
		})
	}
}
