package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/umad-dev/umad/internal/fifotest"
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

// A symlink is followed and its target replaced; a FIFO and a device are written through
// and stay what they are.
func TestWriteKeepsWhatThePathIs(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.txt")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("target.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi.Mode(), err)
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("target holds %q, want new", got)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("target mode %v, want the old 0600 kept", fi.Mode().Perm())
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("made.txt", dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(dangling, []byte("made")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "made.txt")); string(got) != "made" {
		t.Errorf("a dangling link's target holds %q", got)
	}

	fifo := filepath.Join(dir, "fifo")
	reader := fifotest.Reader(t, fifo)
	if err := WriteBytes(fifo, []byte("through the pipe")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, _ := reader.Read(buf); string(buf[:n]) != "through the pipe" {
		t.Errorf("the FIFO's reader got %q", buf[:n])
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO became %v (%v)", fi.Mode(), err)
	}

	// Character devices of our own (root only), so a regression cannot replace /dev/null:
	// null (1, 3) takes the data, full (1, 7) fails the write with ENOSPC.
	null, full := filepath.Join(dir, "null"), filepath.Join(dir, "full")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Logf("mknod (needs root): %v; device cases skipped", err)
	} else {
		if err := syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
			t.Fatal(err)
		}
		if err := WriteBytes(null, []byte("gone")); err != nil {
			t.Fatal(err)
		}
		if err := WriteBytes(full, []byte("x")); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("full: got %v, want ENOSPC", err)
		}
		for _, dev := range []string{null, full} {
			if fi, err := os.Lstat(dev); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
				t.Errorf("%s became %v (%v)", dev, fi.Mode(), err)
			}
		}
	}
	if err := WriteBytes(dir, []byte("x")); err == nil {
		t.Error("writing over a directory should fail")
	}
}

// A regular file is replaced whole wherever it lies, /dev/shm included: a shorter new
// content leaves no tail of the old one.
func TestRegularFileUnderDevIsReplaced(t *testing.T) {
	dir, err := os.MkdirTemp("/dev/shm", "atomicfile-test")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /dev/shm: %v", err)
		}
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "out.jsonl")
	if err := WriteBytes(path, []byte("a long first version\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("short\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short\n" {
		t.Errorf("%s holds %q, want %q", path, b, "short\n")
	}
}

func TestWriteDirReplacesWholeOrNothing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	write := func(content string, err error) error {
		return WriteDir(dir, func(tmp string) error {
			if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
				return err
			}
			return err
		})
	}
	read := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := write("first", nil); err != nil || read() != "first" {
		t.Fatalf("first write: %v", err)
	}
	boom := errors.New("boom")
	if err := write("half", boom); !errors.Is(err, boom) || read() != "first" {
		t.Fatalf("failed write: %v, dir holds %q", err, read())
	}
	if err := write("second", nil); err != nil || read() != "second" {
		t.Fatalf("second write: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// WriteInto replaces the files it writes, merging into existing subdirectories, and leaves
// the others; a failed fill changes nothing.
func TestWriteIntoKeepsOtherFiles(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	files := map[string]string{"keep": "mine", "f": "old", "sub/keep": "mine too", "sub/g": "old"}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(err error) error {
		return WriteInto(dir, func(tmp string) error {
			if err := os.Mkdir(filepath.Join(tmp, "sub"), 0o755); err != nil {
				return err
			}
			for _, name := range []string{"f", "sub/g", "new"} {
				if err := os.WriteFile(filepath.Join(tmp, name), []byte("new"), 0o644); err != nil {
					return err
				}
			}
			return err
		})
	}
	boom := errors.New("boom")
	if err := write(boom); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Fatal("a failed write added a file")
	}
	if err := write(nil); err != nil {
		t.Fatal(err)
	}
	files["f"], files["sub/g"], files["new"] = "new", "new", "new"
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}
