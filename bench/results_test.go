package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each command rewrites only its own section of RESULTS.md.
func TestUpdateSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := UpdateSection(path, "rollout", "rollout v1"); err != nil {
		t.Fatal(err)
	}
	if err := UpdateSection(path, "torch", "torch v1"); err != nil {
		t.Fatal(err)
	}
	if err := UpdateSection(path, "rollout", "rollout v2"); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	s := string(raw)
	if strings.Contains(s, "rollout v1") || !strings.Contains(s, "rollout v2") || !strings.Contains(s, "torch v1") {
		t.Errorf("unexpected file:\n%s", s)
	}
	if strings.Index(s, "rollout v2") > strings.Index(s, "torch v1") {
		t.Error("a rewritten section should keep its place")
	}
}
