package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.txt")
	if err := WriteBytes(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("half of the second"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the fill error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "first" {
		t.Errorf("a failed write changed the file to %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("a failed write left %d files behind", len(entries))
	}
	if err := WriteBytes(path, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "second" {
		t.Errorf("got %q", got)
	}
	if err := WriteBytes(filepath.Join(path, "under-a-file"), nil); err == nil {
		t.Error("writing under a regular file should fail")
	}
}
