package model

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// RemoveTiny leaves a directory WriteTiny wrote as it was before: only others' files stay.
func TestRemoveTiny(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"notes.txt", "hf/README.md"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteTiny(dir, TinyOptions{Arch: "qwen2", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTiny(dir); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	if want := []string{"hf/README.md", "notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	if err := RemoveTiny(dir); err != nil {
		t.Errorf("again: %v", err)
	}
}
