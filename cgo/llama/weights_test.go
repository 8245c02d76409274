package llama_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/testmodel"
)

// The model refuses writes that do not fit the tensor it holds, and a model whose
// weights are mapped from its file refuses every write.
func TestSetWeightsChecks(t *testing.T) {
	path := testmodel.GGUF(t, "qwen2")
	m, err := llama.LoadModel(path, llama.ModelParams{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, err := m.Weight("blk.0.attn_q.weight")
	if err != nil {
		t.Fatal(err)
	}
	if w.Type != uint32(gguf.TypeF32) || !slices.Equal(w.Dims, []int64{64, 64}) || w.Bytes != 64*64*4 {
		t.Fatalf("weight %+v, want F32 [64 64] of %d bytes", w, 64*64*4)
	}
	called := false
	data := func(int) ([]byte, error) { called = true; return make([]byte, w.Bytes), nil }
	for _, c := range []struct {
		w    llama.Weight
		want string
	}{
		{llama.Weight{Name: "blk.0.attn_q.wait", Type: w.Type, Dims: w.Dims, Bytes: w.Bytes}, "no such tensor"},
		{llama.Weight{Name: w.Name, Type: uint32(gguf.TypeF16), Dims: w.Dims, Bytes: w.Bytes / 2}, "is f32, dims [64 64], 16384 bytes in the model; the new data is f16"},
		{llama.Weight{Name: w.Name, Type: w.Type, Dims: []int64{32, 128}, Bytes: w.Bytes}, "dims [32 128]"},
	} {
		if err := m.SetWeights([]llama.Weight{c.w}, data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.w, err, c.want)
		}
	}
	if err := m.SetWeights([]llama.Weight{w}, func(int) ([]byte, error) { return make([]byte, 8), nil }); err == nil || !strings.Contains(err.Error(), "got 8 bytes") {
		t.Errorf("short data: error %v", err)
	}
	if called {
		t.Error("data was asked for a weight that failed its checks")
	}
	mapped, err := llama.LoadModel(path, llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if err := mapped.SetWeights([]llama.Weight{w}, data); err == nil || !strings.Contains(err.Error(), "NoMmap") {
		t.Errorf("mmap'd model: error %v", err)
	}
}
