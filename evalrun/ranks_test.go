package evalrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/rollouts"
)

// TestMergeRanks folds the ranks' files of a seed into its rollouts file in problem order,
// keeps problems the file already had, and removes the rank files; Done finds every
// finished problem before and after.
func TestMergeRanks(t *testing.T) {
	out := t.TempDir()
	dir := SeedDir(out, 7)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(file string, idx ...int) {
		w, err := rollouts.OpenAppend(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, i := range idx {
			if err := w.Append(debate.Record{Index: i, Problem: data.Problem{ID: string(rune('a' + i))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	parts := []Part{{0, 2}, {1, 2}}
	write(RolloutsFile, 0)
	write(parts[0].file(), 2, 4)
	write(parts[1].file(), 3, 1)
	before, err := Done(dir)
	if err != nil || len(before) != 5 {
		t.Fatalf("Done before the merge: %d problems, %v", len(before), err)
	}
	if err := Merge(out, []uint64{7}); err != nil {
		t.Fatal(err)
	}
	if files, _ := rankFiles(dir); len(files) != 0 {
		t.Errorf("rank files left: %v", files)
	}
	var got []int // the file's order
	if _, err := rollouts.Read(filepath.Join(dir, RolloutsFile), func(line []byte) error {
		var r debate.Record
		err := json.Unmarshal(line, &r)
		got = append(got, r.Index)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged problems %v, want %v", got, want)
	}
	if !parts[0].owns(4) || parts[0].owns(3) || !(Part{0, 1}).owns(3) {
		t.Error("problem i belongs to rank i mod world")
	}
}
