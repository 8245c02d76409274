package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// Flag values that were accepted and then misbehaved, or failed with a message about
// something else, are one-line errors naming the flag. Each case runs in a child process
// in an empty directory, which must stay empty (an empty --out wrote a debate run there).
func TestFlagErrorsNameTheFlag(t *testing.T) {
	tiny := testmodel.Tiny(t, "qwen2")
	gguf, hf := filepath.Join(tiny, "model.gguf"), filepath.Join(tiny, "hf")
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	debate := []string{"debate", "--agent", gguf, "-k", "1", "--turns", "1", "--max-tokens", "2", "--prompt-limit", "256"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(debate, "--synthetic", "1", "--out", ""), "--out is empty"},
		{[]string{"sft", "--model", hf, "--synthetic", "2", "--out", ""}, "--out is empty"},
		{[]string{"train", "--agent", hf, "--out", ""}, "--out is empty"},
		{[]string{"model", "tiny", "--out", ""}, "--out is empty"},
		{append(debate, "--synthetic", "0", "--out", out()), "--synthetic must be at least 1, got 0"},
		{[]string{"sft", "--model", hf, "--synthetic", "0", "--out", out()}, "--synthetic must be at least 1, got 0"},
		{[]string{"train", "--agent", hf, "--synthetic", "0", "--out", out()}, "--synthetic must be at least 1, got 0"},
		{append(debate, "--limit", "1", "--out", out()), "--limit and --sample-ratio choose among the problems of --data"},
		{append(debate, "--sample-ratio", "0.5", "--out", out()), "--limit and --sample-ratio choose among the problems of --data"},
		{[]string{"train", "--agent", hf, "--lr", "NaN", "--out", out()}, "--lr NaN: want a finite number"},
		{[]string{"sft", "--model", hf, "--synthetic", "2", "--lr", "NaN", "--out", out()}, "--lr NaN: want a finite number"},
		{append(debate, "--temperature", "Inf", "--out", out()), "--temperature +Inf: want a finite number"},
		{append(debate, "--synthetic", "1", "--gpu-layers", "-1", "--out", out()), "--gpu-layers must be 0 or more, got -1"},
		{append(debate, "--synthetic", "1", "--devices", "NOSUCHGPU", "--out", out()), `device "NOSUCHGPU"`},
	} {
		cwd := t.TempDir()
		cmd := umadProcess(t, 0, c.args...)
		cmd.Dir = cwd
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: %v, stderr %q: want a failure with one line containing %q", c.args, err, msg, c.want)
		}
		if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
			t.Errorf("%q wrote %d entries into the current directory", c.args, len(entries))
		}
	}
}
