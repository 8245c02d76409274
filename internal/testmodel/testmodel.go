// Package testmodel gives tests tiny generated models, made once per test process.
package testmodel

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/model"
)

var (
	mu    sync.Mutex
	dir   string
	built = map[string]string{}
)

// Tiny returns the directory of a tiny model of the architecture (an arch.Names() entry)
// with its chat template: DIR/model.gguf and DIR/hf/.
func Tiny(t testing.TB, arch string) string {
	return TinyVocab(t, arch, 0)
}

// TinyVocab is Tiny with the vocabulary padded to vocab tokens (0 = the tokenizer's own).
func TinyVocab(t testing.TB, arch string, vocab int) string {
	t.Helper()
	return tiny(t, arch, vocab, 7)
}

// TinySeed is Tiny with other random weights: same shape and tokenizer, weights drawn
// from seed (Tiny's is 7).
func TinySeed(t testing.TB, arch string, seed uint64) string {
	t.Helper()
	return tiny(t, arch, 0, seed)
}

func tiny(t testing.TB, arch string, vocab int, seed uint64) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := arch + "-" + strconv.Itoa(vocab)
	if seed != 7 {
		key += "-seed" + strconv.FormatUint(seed, 10)
	}
	if d, ok := built[key]; ok {
		return d
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "umad-testmodels-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d // shared by all tests of the process; Main removes it
	}
	fam, err := chat.ForArch(arch)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Template(fam)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, key)
	if err := model.WriteTiny(out, model.TinyOptions{Arch: arch, Seed: seed, ChatTemplate: tmpl, VocabSize: vocab}); err != nil {
		t.Fatalf("tiny %s model: %v", arch, err)
	}
	built[key] = out
	return out
}

// GGUF is the path of Tiny's GGUF file.
func GGUF(t testing.TB, arch string) string { return filepath.Join(Tiny(t, arch), "model.gguf") }

// Main runs a package's tests and removes the models they made:
// func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// VerifierPrompt is the path of a verifier prompt template in the format of
// --verifier-prompt (umad ships none: a verifier's own comes from its authors), written
// for the test.
func VerifierPrompt(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "verifier-prompt.txt")
	text := "Does the candidate's final answer match the reference answer?\n" +
		"Question: {question}\nReference answer: {gold_answer}\nCandidate's answer: {llm_response}\n" +
		"Reply A if it matches, B if it does not, C if the answer is invalid.\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
