// Package atomicfile writes output files so that readers see either the old file or the
// whole new one, never a part: the data goes to a temporary file in the same directory,
// which is synced and renamed over the target. A symlink is followed and its target
// replaced. What is not a regular file (a device such as /dev/null, a FIFO, a socket), a
// name of an open descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/PID/fd/N) and "-"
// (standard output) are written through instead, truncated as a shell's > would: renaming
// over them would replace the device or pipe with a plain file, or leave the descriptor's
// file unchanged.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Stdout is the path that names standard output (as /dev/stdout does).
const Stdout = "-"

// Write creates path atomically with what fill writes. On any error a regular target is
// left as it was and the temporary file is removed.
func Write(path string, fill func(w io.Writer) error) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if path == Stdout || path == "/dev/stdout" {
		return through(os.Stdout, fill)
	}
	target, err := resolve(path)
	if err != nil {
		return err
	}
	fi, statErr := os.Stat(target)
	switch {
	case statErr == nil && fi.IsDir():
		return errors.New("is a directory")
	case statErr == nil && !fi.Mode().IsRegular(), isDescriptorPath(path):
		// The path as given: the kernel resolves /proc/self/fd links, which name pipes
		// that have no path.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		err = through(f, fill)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	mode := os.FileMode(0o644)
	if statErr == nil {
		mode = fi.Mode().Perm()
	}
	return replace(target, mode, fill)
}

// through writes to w directly.
func through(w io.Writer, fill func(w io.Writer) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// replace writes a temporary file beside path and renames it over path.
func replace(path string, mode os.FileMode, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err = fill(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(f.Name(), mode); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// resolve follows path while it is a symlink, also one whose target does not exist yet.
func resolve(path string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return path, nil // a missing path is created; other errors show when it is
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", errors.New("too many levels of symbolic links")
}

// isDescriptorPath reports whether path names an open descriptor (/dev/stdout ->
// /proc/self/fd/1), whose file a rename would detach from the descriptor, even when that
// file is a regular one (stdout redirected to a file).
func isDescriptorPath(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if abs == "/dev/stdout" || abs == "/dev/stderr" || strings.HasPrefix(abs, "/dev/fd/") {
		return true
	}
	parts := strings.Split(abs, "/") // "", "proc", PID or "self", "fd", N
	return len(parts) == 5 && parts[1] == "proc" && parts[3] == "fd"
}

// WriteBytes creates path atomically with data.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteDir creates directory dir atomically with what fill writes into the temporary
// directory it is given (beside dir, so the final rename stays on one file system). An
// existing dir is moved aside first and removed after; on any error it is left as it was.
func WriteDir(dir string, fill func(tmp string) error) error {
	return writeDir(dir, fill, ReplaceDir)
}

// WriteInto is WriteDir for a directory whose other files must stay (a --force output
// directory): each entry fill wrote replaces its namesake in dir whole, and a directory
// entry is merged into an existing one the same way. A missing or empty dir appears at once.
func WriteInto(dir string, fill func(tmp string) error) error {
	return writeDir(dir, fill, moveInto)
}

// writeDir fills a temporary directory beside dir and puts it in place with place.
func writeDir(dir string, fill func(tmp string) error, place func(tmp, dir string) error) (err error) {
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	return place(tmp, dir)
}

// ReplaceDir moves directory tmp to dir, moving an existing dir aside first and removing it
// after.
func ReplaceDir(tmp, dir string) error {
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("replace %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir) // put the previous one back
		}
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("replace %s: remove the previous one: %w", dir, err)
		}
	}
	return nil
}

// moveInto renames src to dst, or, where dst is a directory that holds files, moves each
// entry of src into it the same way.
func moveInto(src, dst string) error {
	err := os.Rename(src, dst) // replaces a file, or an empty directory
	if err == nil {
		return nil
	}
	entries, rerr := os.ReadDir(src)
	if st, serr := os.Stat(dst); rerr != nil || serr != nil || !st.IsDir() {
		return fmt.Errorf("move %s into place: %w", dst, err)
	}
	for _, e := range entries {
		if err := moveInto(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(src)
}
