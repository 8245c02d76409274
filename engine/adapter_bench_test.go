package engine_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// BenchmarkAdapterSync is what syncing a LoRA-trained policy into the rollout engine costs
// at Qwen2.5-0.5B's shape (random weights, F32) with a rank-32 adapter on all seven targets
// of every layer:
//
//	go test ./engine/ -run '^$' -bench AdapterSync -benchtime 5x
//
// write-gguf converts the adapter in memory to llama.cpp's LoRA GGUF (what a trainer does);
// peft2gguf does it from a PEFT directory (`umad convert lora2gguf`); set-adapter checks,
// loads and swaps it into a running server (Server.SetAdapter); sync is write-gguf plus
// set-adapter; reload-base opens the base model and its engine again, for comparison. The
// set-up writes the 4 GB base model (GGUF and safetensors) to the temp directory.
func BenchmarkAdapterSync(b *testing.B) {
	shape := model.Presets["qwen2.5-0.5b"]
	dir := b.TempDir()
	if err := model.WriteTiny(dir, model.TinyOptions{Shape: &shape, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	base := filepath.Join(dir, "model.gguf")
	if err := os.RemoveAll(filepath.Join(dir, "hf")); err != nil { // not needed: free the disk
		b.Fatal(err)
	}
	s, err := model.ReadGGUFShape(base)
	if err != nil {
		b.Fatal(err)
	}
	a, err := peft.NewLoRAAdapter(peft.LoRAConfig{Rank: 32, Alpha: 64, Targets: peft.LoRATargets}, s)
	if err != nil {
		b.Fatal(err)
	}
	var params int64
	for _, p := range a.Pairs {
		params += int64(len(p.A) + len(p.B))
	}
	b.Logf("adapter: %.1fM parameters, %.1f MB at F32", float64(params)/1e6, float64(4*params)/1e6)
	peftDir := filepath.Join(dir, "peft")
	if err := a.WritePEFT(peftDir); err != nil {
		b.Fatal(err)
	}
	srv, err := engine.OpenServer(base, engine.Placement{}, engine.Options{Slots: 4, SeqContext: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	out := filepath.Join(dir, "adapter.gguf")
	syscall.Sync() // the set-up's dirty pages must not be flushed during a timed run

	b.Run("write-gguf", func(b *testing.B) {
		b.SetBytes(4 * params)
		for range b.N {
			if err := a.WriteGGUF(out, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("peft2gguf", func(b *testing.B) {
		b.SetBytes(4 * params)
		for range b.N {
			if err := peft.ToGGUF(peftDir, base, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set-adapter", func(b *testing.B) {
		b.SetBytes(4 * params)
		for range b.N {
			if err := srv.SetAdapter(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sync", func(b *testing.B) {
		b.SetBytes(4 * params)
		for range b.N {
			if err := a.WriteGGUF(out, s); err != nil {
				b.Fatal(err)
			}
			if err := srv.SetAdapter(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reload-base", func(b *testing.B) {
		for range b.N {
			r, err := engine.OpenServer(base, engine.Placement{}, engine.Options{Slots: 4, SeqContext: 512})
			if err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
}
