// Package outpath keeps a command's output off its inputs: an output path that is, holds or
// lies inside an input is refused before anything is written.
package outpath

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Check refuses an output path that is, contains or lies inside one of the inputs: clearing
// the output would remove the input's files, or the output replace them. Symlinks are
// resolved before the paths are compared.
func Check(out string, inputs ...string) error {
	o, err := realPath(out)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		i, err := realPath(in)
		if err != nil {
			return err
		}
		how := ""
		switch {
		case o == i:
			how = "is"
		case within(o, i):
			how = "lies inside"
		case within(i, o):
			how = "contains"
		default:
			continue
		}
		return fmt.Errorf("the output %s %s the input %s; write the output elsewhere", out, how, in)
	}
	return nil
}

// realPath is path made absolute with its symlinks resolved, as far as it exists.
func realPath(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = filepath.Dir(p) // ends at "/", which resolves
	}
}

// within reports whether path lies inside directory dir (both clean and absolute).
func within(path, dir string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
