package cli

import (
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// Benchmark flags that measure nothing, or that the chosen mode ignores, are refused
// before any model is generated or loaded.
func TestBenchFlagErrors(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	small := []string{"bench", "rollout", "--big-vocab", "0", "-k", "2", "--max-tokens", "2", "--prompt-tokens", "4"}
	debate := []string{"bench", "debate", "--synthetic", "2", "-k", "1", "--turns", "1", "--max-tokens", "2", "--repeats", "1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(debate, "--synthetic", "0"), "--synthetic must be at least 1, got 0"},
		{append(debate, "--turns", "0"), "--turns must be at least 1, got 0"},
		{append(debate, "--agent", gguf, "--two-models"), "--two-models is for the generated models; it does nothing with --agent"},
		{append(debate, "--threads", "-1"), "--threads must be 0"},
		{append(small, "--repeats", "0"), "--repeats must be at least 1, got 0"},
		{append(small, "--threads", "-1"), "--threads must be 0"},
		{append(small, "--big-vocab", "-5"), "--big-vocab must be 0 (skip) or a vocabulary size, got -5"},
		{append(small, "--preset", "gpt5"), `unknown preset "gpt5"`},
		{[]string{"bench", "rollout", "--model", gguf, "--preset", "gpt5"}, "--preset is for the generated models; it does nothing with --model"},
	} {
		_, _, err := runApp(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args[1:], err, tc.want)
		}
	}
}
