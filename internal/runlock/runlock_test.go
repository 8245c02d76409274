package runlock

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOneHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock conflicts between open files, so a second Acquire in this process stands for
	// a second process.
	_, err = Dir(dir)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: got %v, want an error naming pid %d", err, os.Getpid())
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, File)); !os.IsNotExist(err) {
		t.Errorf("release left the lock file (%v)", err)
	}
	l2, err := Dir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("release left the empty directory it created (%v)", err)
	}
}
