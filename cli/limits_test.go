package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// Sizes and thread counts that made llama.cpp assert, hang or take the machine's memory
// are one-line errors naming the flag, given before anything large is allocated. Each
// case runs in a child process under a 4 GiB address-space limit, so that a regression
// fails the test instead of exhausting the machine.
func TestLlamaFlagLimits(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	hf := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	gen := []string{"generate", "--model", gguf, "--prompt", "hi", "--max-tokens", "4"}
	debate := func(extra ...string) []string {
		return append([]string{"debate", "--agent", gguf, "--synthetic", "2", "-k", "1", "--turns", "1",
			"--out", filepath.Join(t.TempDir(), "run")}, extra...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(gen, "--threads", "100000"), "--threads must be 0 (the default) or 1 to"},
		{append(gen, "--threads", "-1"), "--threads must be 0 (the default) or 1 to"},
		{append(gen, "--ctx", "100000000"), "--ctx 100000000 is more than the 4096 tokens of context"},
		{debate("--max-tokens", "1000000000"), "--max-tokens 1000000000 is more than the 4096 tokens of context"},
		{debate("--ctx", "100000000"), "--ctx 100000000 is more than the 4096 tokens of context"},
		{debate("--max-tokens", "8", "--prompt-limit", "1000000"), "--prompt-limit 1000000 plus --max-tokens 8 is more than the 4096 tokens of context"},
		{debate("--max-tokens", "8", "--prompt-limit", "5000", "--ctx", "4096"), "--prompt-limit 5000 plus --max-tokens 8 is more than --ctx 4096"},
		{debate("--max-tokens", "8", "--threads", "100000"), "--threads must be"},
		{[]string{"train", "--agent", hf, "--algo", "grpo", "--turns", "1", "--max-tokens", "1000000000", "--out", filepath.Join(t.TempDir(), "run")}, "--max-tokens 1000000000 is more than the 4096 tokens of context"},
		{[]string{"train", "--agent", hf, "--algo", "grpo", "--turns", "1", "--ctx", "100000000", "--out", filepath.Join(t.TempDir(), "run")}, "--ctx 100000000 is more than the 4096 tokens of context"},
		{[]string{"train", "--agent", hf, "--algo", "grpo", "--turns", "1", "--max-tokens", "8", "--prompt-limit", "1000000", "--out", filepath.Join(t.TempDir(), "run")}, "--prompt-limit 1000000 plus --max-tokens 8 is more than the 4096 tokens of context"},
		{[]string{"score", "--gguf", gguf, "--in", writeLines(t, `{"prompt_tokens":[1],"response_tokens":[2]}`), "--threads", "100000"}, "--threads must be"},
	} {
		code, stderr := runUmadProcess(t, 4<<30, c.args...)
		msg := strings.TrimSpace(stderr)
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and one line containing %q", c.args, code, msg, c.want)
		}
	}
}

// A vocabulary of 2e9 tokens (--vocab, or vocab_size in config.json) was padded with
// strings until the machine ran out of memory; it is refused up front.
func TestHugeVocabularyRefused(t *testing.T) {
	hf := tinyHFDir(t, "qwen2")
	cfg, err := os.ReadFile(filepath.Join(hf, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	big := regexp.MustCompile(`"vocab_size": *\d+`).ReplaceAll(cfg, []byte(`"vocab_size": 2000000000`))
	if bytes.Equal(big, cfg) {
		t.Fatal("config.json has no vocab_size to change")
	}
	if err := os.WriteFile(filepath.Join(hf, "config.json"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "tiny", "--vocab", "2000000000", "--out", filepath.Join(dir, "tiny")}, "--vocab 2000000000: want 0"},
		{[]string{"convert", "hf2gguf", hf, filepath.Join(dir, "m.gguf")}, "vocab_size 2000000000 is more than the 16777216 tokens"},
		{[]string{"sft", "--model", hf, "--synthetic", "4", "--out", filepath.Join(dir, "sft")}, "vocab_size 2000000000 is more than the 16777216 tokens"},
	} {
		code, stderr := runUmadProcess(t, 4<<30, c.args...)
		msg := strings.TrimSpace(stderr)
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and one line containing %q", c.args, code, msg, c.want)
		}
	}
}
