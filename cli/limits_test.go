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

// Issue 44: a vocabulary that fits MemAvailable but not the process's address-space limit
// (--vocab 10000000 under 4 GiB) died with Go's out-of-memory fatal error and left its
// hidden temporary directory; it is refused before anything is allocated, and nothing is
// left beside the output.
func TestTinyVocabularyOverAddressSpaceRefused(t *testing.T) {
	dir := t.TempDir()
	code, stderr := runUmadProcess(t, 4<<30, "model", "tiny", "--vocab", "10000000", "--out", filepath.Join(dir, "tiny"))
	msg := strings.TrimSpace(stderr)
	if want := "a vocabulary of 10000000 tokens needs about"; code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
		t.Errorf("exit %d, stderr %q: want exit 1 and one line containing %q", code, msg, want)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the refused model tiny left %v", left)
	}
}

// Issue 44: the float thresholds of --stop must be finite and positive, refused while
// the flags are read: eu=Inf ended a started run with "json: unsupported value: +Inf".
func TestStopThresholdsRefused(t *testing.T) {
	for _, v := range []string{"eu=Inf", "eu=+Inf", "eu=inf", "eu=NaN", "eu=0", "eu=-1", "eu=1e400", "agree=0"} {
		if _, err := resolveDebateArgs(t, "--stop", v); err == nil || !strings.Contains(err.Error(), "--stop \""+v+"\"") {
			t.Errorf("--stop %s: %v, want a refusal naming it", v, err)
		}
	}
	if cfg, err := resolveDebateArgs(t, "--stop", "eu=0.5"); err != nil || cfg.StopEU != 0.5 {
		t.Errorf("--stop eu=0.5: %v, %v", cfg.StopEU, err)
	}
}

// Issue 44: --verifier-prompt /dev/zero (an endless template) took debate's memory; a
// template over verifier.MaxTemplateBytes is refused in one line before any work, by
// debate, train and grade alike.
func TestHugeVerifierPromptRefused(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	hf := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("{question} {gold_answer} {llm_response} "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prompt := range []string{"/dev/zero", big} {
		out := filepath.Join(t.TempDir(), "run")
		for _, args := range [][]string{
			{"debate", "--agent", gguf, "--synthetic", "2", "-k", "1", "--turns", "1", "--verifier", gguf, "--verifier-prompt", prompt, "--out", out},
			{"train", "--agent", hf, "--algo", "grpo", "--turns", "1", "--reward", "robust+verifier=" + gguf, "--verifier-prompt", prompt, "--out", out},
			{"grade", "--in", writeLines(t, `{"pred":"1","gold":"1"}`), "--verifier", gguf, "--verifier-prompt", prompt},
		} {
			code, stderr := runUmadProcess(t, 4<<30, args...)
			msg := strings.TrimSpace(stderr)
			if want := "larger than 1048576 bytes"; code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
				t.Errorf("%s --verifier-prompt %s: exit %d, stderr %q: want exit 1 and one line containing %q", args[0], prompt, code, msg, want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s: the refused run left %s", args[0], out)
			}
		}
	}
}

// Issue 44: a --prompt-limit below the turn-1 debate prompt (every response emptied)
// passed the plan and the memory check, and the run failed after loading its agents. It
// is refused before any model loads, by train (--dry-run too), debate and an experiment's
// plan; a limit that fits passes.
func TestPromptFloorCheckedBeforeLoading(t *testing.T) {
	tiny := testmodel.Tiny(t, "qwen2")
	hf, gguf := filepath.Join(tiny, "hf"), filepath.Join(tiny, "model.gguf")
	train := func(limit string, extra ...string) []string {
		return append([]string{"train", "--agent", hf, "--agent", hf, "--algo", "ippo", "--turns", "2", "--synthetic", "8",
			"--batch", "2", "-g", "2", "--val-synthetic", "2", "--max-tokens", "8", "--prompt-limit", limit,
			"--out", filepath.Join(t.TempDir(), "run")}, extra...)
	}
	debate := func(limit string) []string {
		return []string{"debate", "--agent", gguf, "--agent", gguf, "--synthetic", "2", "-k", "1", "--turns", "2",
			"--max-tokens", "8", "--prompt-limit", limit, "--threads", "1", "--out", filepath.Join(t.TempDir(), "run")}
	}
	const want = "--prompt-limit 256 is too small for agent 0 even for the shortest question, problem "
	for _, args := range [][]string{train("256", "--dry-run"), train("256"), debate("256")} {
		_, _, err := runApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "even with every response emptied, limit 256") {
			t.Errorf("%s --prompt-limit 256: %v, want %q", args[0], err, want)
		}
		if _, err := os.Stat(args[len(args)-1]); err == nil && args[0] == "debate" {
			t.Errorf("the refused debate left %s", args[len(args)-1])
		}
	}
	if _, _, err := runApp(t, train("320", "--dry-run")...); err != nil {
		t.Errorf("train --dry-run --prompt-limit 320: %v", err)
	}
	dir := t.TempDir()
	grid := filepath.Join(dir, "grid.toml")
	text := strings.NewReplacer("OUT", filepath.Join(dir, "exp"), "Q2", tiny, "Q3", testmodel.Tiny(t, "qwen3"), "prompt-limit = 512", "prompt-limit = 256").Replace(expGrid)
	if err := os.WriteFile(grid, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, "experiment", "--dry-run", grid); err == nil || !strings.Contains(err.Error(), "--prompt-limit 256 is too small") {
		t.Errorf("experiment --dry-run with train prompt-limit 256: %v", err)
	}
}
