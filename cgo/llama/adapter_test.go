package llama_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// An adapter applied by a context cannot be freed under it (llama.cpp would read freed
// memory at the next decode); removing, clearing or closing the context releases it.
func TestAdapterLifetime(t *testing.T) {
	path := testmodel.GGUF(t, "qwen2")
	s, err := model.ReadGGUFShape(path)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 2, Alpha: 2, Targets: slices.Clone(peft.LoRATargets)}, s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := ad.WriteGGUF(file, s); err != nil {
		t.Fatal(err)
	}
	m := load(t, "qwen2")
	newCtx := func() *llama.Context {
		c, err := m.NewContext(llama.ContextParams{NCtx: 64})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	load := func() *llama.Adapter {
		a, err := m.LoadAdapter(file)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, c := load(), newCtx()
	for range 2 { // applying twice is still one use
		if err := c.SetAdapter(a, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err == nil {
		t.Fatal("freed an adapter a context applies")
	}
	if err := c.RemoveAdapter(a); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAdapter(a); err == nil {
		t.Fatal("removed an adapter twice")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAdapter(a, 1); !errors.Is(err, llama.ErrClosed) {
		t.Fatalf("applying a freed adapter: %v", err)
	}

	a = load()
	if err := c.SetAdapter(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.ClearAdapters(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("after ClearAdapters: %v", err)
	}

	a, c2 := load(), newCtx()
	if err := c2.SetAdapter(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("after the context closed: %v", err)
	}
	c.Close()
}

// Adapter changes on a context and SetWeights on its model take the same two locks: they
// must take them in one order, or the two deadlock.
func TestAdapterChangesDuringSetWeights(t *testing.T) {
	path := testmodel.GGUF(t, "qwen2")
	s, err := model.ReadGGUFShape(path)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 2, Alpha: 2, Targets: []string{"q_proj"}}, s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := ad.WriteGGUF(file, s); err != nil {
		t.Fatal(err)
	}
	m, err := llama.LoadModel(path, llama.ModelParams{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	// Closed at the end, not deferred: after a deadlock Close would block too.
	c, err := m.NewContext(llama.ContextParams{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.LoadAdapter(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Weight("blk.0.attn_q.weight")
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, w.Bytes)
	stop := time.Now().Add(time.Second)
	errs := make(chan error, 2)
	go func() {
		for time.Now().Before(stop) {
			if err := c.SetAdapter(a, 1); err != nil {
				errs <- err
				return
			}
			if err := c.RemoveAdapter(a); err != nil {
				errs <- err
				return
			}
			if err := c.SetAdapter(a, 1); err != nil {
				errs <- err
				return
			}
			if err := c.ClearAdapters(); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for time.Now().Before(stop) {
			if err := m.SetWeights([]llama.Weight{w}, func(int) ([]byte, error) { return zeros, nil }); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("adapter changes and SetWeights deadlocked")
		}
	}
	for _, close := range []func() error{c.Close, a.Close, m.Close} {
		if err := close(); err != nil {
			t.Fatal(err)
		}
	}
}

// lastLayerAdapter writes an adapter whose only non-zero pair is the last layer's
// down_proj: it changes the logits but no K or V, so a KV cache computed under one such
// adapter is the one any other would compute.
func lastLayerAdapter(t *testing.T, s model.Shape, seed float32) string {
	t.Helper()
	ad, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 2, Alpha: 2, Targets: []string{"down_proj"}}, s)
	if err != nil {
		t.Fatal(err)
	}
	p := ad.Pairs[peft.LoRAKey{Layer: s.Layers - 1, Target: "down_proj"}]
	for i := range p.A {
		p.A[i] = seed * float32(i%7-3) / 8
	}
	for i := range p.B {
		p.B[i] = seed * float32(i%5-2) / 4
	}
	file := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := ad.WriteGGUF(file, s); err != nil {
		t.Fatal(err)
	}
	return file
}

// Swapping adapters between two decodes of the same shape must change what the second
// computes: llama.cpp reuses the previous graph when the batch's shape matches, and that
// graph points at the old adapter's tensors (freed here).
func TestAdapterSwapBetweenDecodes(t *testing.T) {
	path := testmodel.GGUF(t, "qwen2")
	s, err := model.ReadGGUFShape(path)
	if err != nil {
		t.Fatal(err)
	}
	fileX, fileY := lastLayerAdapter(t, s, 1), lastLayerAdapter(t, s, -2)
	m := load(t, "qwen2")
	b, err := llama.NewBatch(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// decode runs token tok at pos on c and returns its logits.
	decode := func(c *llama.Context, tok int32, pos int) []float32 {
		b.Clear()
		if _, err := b.Add(tok, pos, []int32{0}, true); err != nil {
			t.Fatal(err)
		}
		if err := c.Decode(b); err != nil {
			t.Fatal(err)
		}
		l, err := c.Logits(0)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(l)
	}
	withAdapter := func(file string) (*llama.Context, *llama.Adapter) {
		c, err := m.NewContext(llama.ContextParams{NCtx: 64})
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.LoadAdapter(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetAdapter(a, 1); err != nil {
			t.Fatal(err)
		}
		return c, a
	}

	c, x := withAdapter(fileX)
	defer c.Close()
	decode(c, 5, 0)
	y, err := m.LoadAdapter(fileY)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAdapter(x); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAdapter(y, 1); err != nil {
		t.Fatal(err)
	}
	got := decode(c, 7, 1)

	ref, ry := withAdapter(fileY)
	defer ref.Close()
	decode(ref, 5, 0)
	want := decode(ref, 7, 1)
	refX, rx := withAdapter(fileX)
	defer refX.Close()
	decode(refX, 5, 0)
	old := decode(refX, 7, 1)
	var diff, apart float64
	for i := range want {
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
		apart = max(apart, math.Abs(float64(old[i]-want[i])))
	}
	if apart < 1e-2 {
		t.Fatalf("the two adapters give the same logits (max diff %g): the test cannot tell them apart", apart)
	}
	if diff > 1e-4 {
		t.Errorf("after the swap the logits differ from a context with the new adapter by %g (the adapters' logits are %g apart)", diff, apart)
	}
	for _, c := range []*llama.Context{c, ref, refX} {
		if err := c.ClearAdapters(); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []*llama.Adapter{y, ry, rx} {
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
