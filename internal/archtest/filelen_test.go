package archtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines is the longest a source file other than a test may be: past it a file holds
// more than one job, and it is split by job into files named for what they hold.
const maxFileLines = 650

// TestFileLength checks every Go, C and C++ source of the repository that git tracks or
// would track (so a new file counts before its commit), tests left out.
func TestFileLength(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go", "*.c", "*.cpp", "*.h")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git ls-files found only %d sources: wrong root?", len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) { // removed from the work tree, not yet from the index
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			t.Errorf("%s: %d lines, over %d; split it by job into files named for what they hold", f, n, maxFileLines)
		}
	}
}
