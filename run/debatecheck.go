package run

// umad debate --check-determinism: the debate twice, then where its outputs first differ.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/umad-dev/umad/rollouts"
)

// CheckDebateDeterminism runs the debate d twice, in d.Out/check-1/run and
// d.Out/check-2/run (the same base name, which the reports show), and fails with the
// first difference between them.
func CheckDebateDeterminism(ctx context.Context, d Debate) error {
	if d.NProc > 1 {
		return errors.New("--check-determinism runs the debate in one process; leave out --nproc")
	}
	var dirs [2]string
	for i := range dirs {
		dirs[i] = filepath.Join(d.Out, fmt.Sprintf("check-%d", i+1), "run")
		if _, err := os.Stat(dirs[i]); err == nil {
			return fmt.Errorf("--check-determinism: %s exists (a second run would resume it); remove it or give another --out", dirs[i])
		}
	}
	for i, dir := range dirs {
		one := d
		one.Out = dir
		if err := one.Run(ctx); err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
	}
	where, err := FirstDifference(dirs[0], dirs[1])
	if err != nil {
		return err
	}
	if where != "" {
		return fmt.Errorf("the two runs differ: %s", where)
	}
	fmt.Fprintf(d.Stdout, "the two runs agree byte for byte: %s and %s\n", dirs[0], dirs[1])
	return nil
}

// FirstDifference compares two run directories file by file (rollout files by their
// records) and says where they first differ: file, line and JSON field; "" if nowhere.
func FirstDifference(a, b string) (string, error) {
	files := map[string]bool{}
	for _, dir := range []string{a, b} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				files[rel] = true
			}
			return err
		})
		if err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	// Rollout files first: the reports are made from them.
	sort.Slice(names, func(i, j int) bool {
		ri, rj := strings.HasSuffix(names[i], ".jsonl.zst"), strings.HasSuffix(names[j], ".jsonl.zst")
		return ri && !rj || ri == rj && names[i] < names[j]
	})
	for _, f := range names {
		la, errA := fileLines(filepath.Join(a, f))
		lb, errB := fileLines(filepath.Join(b, f))
		switch {
		case errors.Is(errA, fs.ErrNotExist) || errors.Is(errB, fs.ErrNotExist):
			return fmt.Sprintf("%s is in one run only", f), nil
		case errA != nil:
			return "", errA
		case errB != nil:
			return "", errB
		}
		for i := range max(len(la), len(lb)) {
			if i >= len(la) || i >= len(lb) {
				return fmt.Sprintf("%s: line %d is in one run only", f, i+1), nil
			}
			if !bytes.Equal(la[i], lb[i]) {
				return fmt.Sprintf("%s line %d%s", f, i+1, fieldDifference(la[i], lb[i])), nil
			}
		}
	}
	return "", nil
}

// fileLines is a file's lines; a rollout file's are its records, decompressed.
func fileLines(path string) ([][]byte, error) {
	if strings.HasSuffix(path, ".jsonl.zst") {
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		var lines [][]byte
		torn, err := rollouts.Read(path, func(l []byte) error {
			lines = append(lines, slices.Clone(l))
			return nil
		})
		if err == nil && torn {
			lines = append(lines, []byte("(a torn record)"))
		}
		return lines, err
	}
	raw, err := os.ReadFile(path)
	return bytes.SplitAfter(raw, []byte("\n")), err
}

// fieldDifference names the first JSON field where two lines differ, with both values;
// "" when either line is not JSON.
func fieldDifference(a, b []byte) string {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return ""
	}
	path, x, y := firstField("", va, vb)
	if path == "" { // the same values, written otherwise
		return ""
	}
	return fmt.Sprintf(", field %s: %s vs %s", path, short(x), short(y))
}

// firstField walks two decoded JSON values in key order and returns the first path where
// they differ, with the values there.
func firstField(path string, a, b any) (string, any, any) {
	switch a := a.(type) {
	case map[string]any:
		if b, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(a)+len(b))
			for k := range a {
				keys = append(keys, k)
			}
			for k := range b {
				if _, ok := a[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				if p, x, y := firstField(strings.TrimPrefix(path+"."+k, "."), a[k], b[k]); p != "" {
					return p, x, y
				}
			}
			return "", nil, nil
		}
	case []any:
		if b, ok := b.([]any); ok && len(a) == len(b) {
			for i := range a {
				if p, x, y := firstField(fmt.Sprintf("%s[%d]", path, i), a[i], b[i]); p != "" {
					return p, x, y
				}
			}
			return "", nil, nil
		}
	default:
		if a == b {
			return "", nil, nil
		}
	}
	if path == "" {
		path = "(the whole line)"
	}
	return path, a, b
}

// short is a JSON value as text, cut to 60 bytes.
func short(v any) string {
	s, _ := json.Marshal(v)
	if len(s) > 60 {
		return string(s[:57]) + "..."
	}
	return string(s)
}
