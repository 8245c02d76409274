package run

import (
	"testing"

	"github.com/umad-dev/umad/experiment"
)

// --only matching no cell is an error, where it said every selected cell was done.
func TestSelectCellsNoMatch(t *testing.T) {
	states := []*cellState{{Cell: experiment.Cell{Name: "debate/zero-shot/pair/toy/seed-1"}}}
	if _, err := selectCells("zzz", states); err == nil || err.Error() != `no cell matches --only "zzz"` {
		t.Errorf("--only zzz: %v", err)
	}
	if todo, err := selectCells("zero", states); err != nil || len(todo) != 1 {
		t.Errorf("--only zero: %d cells, %v", len(todo), err)
	}
}
