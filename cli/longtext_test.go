package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// A long run of letters crashed llama.cpp's Qwen2 pre-tokenizer (stack overflow, SIGSEGV)
// from about 30,000 letters on; now such a prompt tokenizes and gets the usual one-line
// error for a prompt longer than the context, and a text beyond the tokenizer's limit is
// refused.
func TestGenerateLongRunOfLetters(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	for _, c := range []struct {
		letters int
		want    string
	}{
		{100_000, "does not fit the context"},
		{1_000_000, "does not fit the context"},
		{3_000_000, "longer than"},
	} {
		var stderr bytes.Buffer
		code := runWithApp([]string{"generate", "--model", gguf, "--prompt", strings.Repeat("x", c.letters), "--max-tokens", "4"}, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%d letters: exit %d, stderr %q: want exit 1 and one line containing %q", c.letters, code, msg, c.want)
		}
	}
}
