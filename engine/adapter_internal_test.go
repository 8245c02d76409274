package engine

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// When the previous adapter cannot be freed after a swap (here another context still
// applies it), the new adapter stays applied and named: the error does not undo the swap.
func TestSetAdapterKeepsTheSwapWhenFreeingFails(t *testing.T) {
	base := testmodel.GGUF(t, "qwen2")
	sh, err := model.ReadGGUFShape(base)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for range 2 {
		a, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 2, Alpha: 2, Targets: slices.Clone(peft.LoRATargets)}, sh)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "adapter.gguf")
		if err := a.WriteGGUF(f, sh); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	s, err := OpenServer(base, Placement{}, Options{Slots: 2, SeqContext: 64, KVType: KVF32, FlashAttn: FlashOff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetAdapter(files[0]); err != nil {
		t.Fatal(err)
	}
	first := s.adapter
	holder, err := s.model.NewContext(llama.ContextParams{NCtx: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.SetAdapter(first, 1); err != nil {
		t.Fatal(err)
	}
	err = s.SetAdapter(files[1])
	if err == nil || !strings.Contains(err.Error(), "the new adapter is applied") {
		t.Fatalf("freeing a held adapter: %v", err)
	}
	if s.AdapterPath() != files[1] || s.adapter == first || s.adapter == nil {
		t.Fatalf("after the failed free the server names %s, want %s applied", s.AdapterPath(), files[1])
	}
	if err := s.ClearAdapter(); err != nil {
		t.Fatalf("the new adapter could not be cleared (freed under the server?): %v", err)
	}
	if err := holder.ClearAdapters(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
}
