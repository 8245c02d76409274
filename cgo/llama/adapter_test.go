package llama_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/model"
)

// An adapter applied by a context cannot be freed under it (llama.cpp would read freed
// memory at the next decode); removing, clearing or closing the context releases it.
func TestAdapterLifetime(t *testing.T) {
	path := testmodel.GGUF(t, "qwen2")
	s, err := model.ReadGGUFShape(path)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := model.NewLoRAAdapter(model.LoRAConfig{Rank: 2, Alpha: 2, Targets: slices.Clone(model.LoRATargets)}, s)
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
	ad, err := model.NewLoRAAdapter(model.LoRAConfig{Rank: 2, Alpha: 2, Targets: []string{"q_proj"}}, s)
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
