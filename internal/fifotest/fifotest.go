// Package fifotest makes named pipes for tests of code that must write through them.
package fifotest

import (
	"os"
	"syscall"
	"testing"
)

// Reader makes a FIFO at path and opens it for reading without blocking, so a writer's
// open does not wait and a regression (renaming a file over the FIFO) fails instead of
// hanging. The reader is closed when the test ends.
func Reader(t *testing.T, path string) *os.File {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fd), path)
	t.Cleanup(func() { r.Close() })
	return r
}
