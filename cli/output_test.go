package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/fifotest"
)

// --out names what it names: a FIFO is written through and stays a FIFO, a symlink stays a
// symlink with its target replaced, and "-" is standard output.
func TestGradeOutKeepsFIFOsAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	in := writeLines(t, `{"pred": "2", "gold": "2"}`)

	fifo := filepath.Join(dir, "f.jsonl")
	reader := fifotest.Reader(t, fifo)
	if _, stderr, err := runGradeCmd(t, "--in", in, "--out", fifo); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	buf := make([]byte, 4096)
	if n, _ := reader.Read(buf); !strings.Contains(string(buf[:n]), `"strict":true`) {
		t.Errorf("the FIFO's reader got %q", buf[:n])
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("--out FIFO became %v (%v)", fi.Mode(), err)
	}

	target, link := filepath.Join(dir, "graded.jsonl"), filepath.Join(dir, "link.jsonl")
	os.WriteFile(target, []byte("old\n"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runGradeCmd(t, "--in", in, "--out", link); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("--out symlink became %v (%v)", fi.Mode(), err)
	}
	if got, _ := os.ReadFile(target); !strings.Contains(string(got), `"strict":true`) {
		t.Errorf("the symlink's target holds %q", got)
	}

	stdout, stderr, err := runGradeCmd(t, "--in", in, "--out", "-")
	if err != nil || !strings.Contains(stdout, `"strict":true`) {
		t.Errorf("--out -: stdout %q, err %v\n%s", stdout, err, stderr)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error(`--out - made a file named "-"`)
	}
}
