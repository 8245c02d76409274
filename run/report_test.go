package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A report's argument is LABEL=RUN, or a run alone, even one whose path holds "=".
func TestLabelledRun(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "lr=1e-6")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string][2]string{
		"grpo=runs/a":     {"grpo", "runs/a"},
		"runs/zero-shot/": {"zero-shot", "runs/zero-shot/"},
		odd:               {"lr=1e-6", odd},
		"umad=" + odd:     {"umad", odd},
	} {
		label, run, err := labelledRun(arg)
		if err != nil || label != want[0] || run != want[1] {
			t.Errorf("labelledRun(%q) = %q, %q, %v; want %q, %q", arg, label, run, err, want[0], want[1])
		}
	}
	for _, arg := range []string{"=runs/a", "grpo="} {
		if _, _, err := labelledRun(arg); err == nil || !strings.Contains(err.Error(), "LABEL=RUN with both parts") {
			t.Errorf("labelledRun(%q): %v", arg, err)
		}
	}
}
