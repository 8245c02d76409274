// Package runlock keeps one umad process per output: an exclusive flock(2) on a lock file
// that holds the owner's PID, so a second process fails at once naming the first. The lock
// goes with the process (also when it is killed); Release removes the file.
package runlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File is the lock file's name inside a run directory.
const File = ".lock"

// Lock is a held lock.
type Lock struct {
	f    *os.File
	path string
	dir  string // a directory Dir created, removed on Release if it is empty then
}

// Dir creates dir if needed and locks it through dir/.lock.
func Dir(dir string) (*Lock, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := Acquire(filepath.Join(dir, File), dir)
	switch {
	case err != nil && statErr != nil:
		os.Remove(dir) // made here for a lock not had: leave nothing behind (it stays if not empty)
	case err == nil && statErr != nil:
		l.dir = dir
	}
	return l, err
}

// Acquire locks the file at path, creating it; what names the locked thing in errors.
func Acquire(path, what string) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", what, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			owner, _ := io.ReadAll(io.LimitReader(f, 32))
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				pid := strings.TrimSpace(string(owner))
				if pid == "" {
					pid = "not yet written"
				}
				return nil, fmt.Errorf("%s is in use by another umad process (pid %s)", what, pid)
			}
			return nil, fmt.Errorf("lock %s: %w", what, err)
		}
		// The previous owner may have released and removed the file after we opened it:
		// only the file now at path counts.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil && held.Dev == now.Dev && held.Ino == now.Ino {
			if err := f.Truncate(0); err == nil {
				_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", what, err)
			}
			return &Lock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// Release removes the lock file and unlocks it; a directory that Dir created goes too
// when nothing else is in it (a run that failed at start).
func (l *Lock) Release() {
	os.Remove(l.path)
	l.f.Close()
	if l.dir != "" {
		os.Remove(l.dir) // fails, as wanted, unless empty
	}
}
