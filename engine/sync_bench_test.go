package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainspec"
)

// BenchmarkSync times one agent's weight sync, trainer -> llama.cpp, on the model in
// $UMAD_SYNC_MODEL (a directory of `umad model tiny`, e.g. --preset qwen2.5-0.5b; default
// the tiny qwen2), with the trainer's default engine (16 slots, 7,168 tokens each, F16 KV):
//
//	memcpy   a plain copy of the same bytes into memory already touched: the floor
//	inplace  Server.UpdateWeights: map, write into the loaded model, clear the KV cache
//	file     what --sync file does: safetensors + GGUF conversion + a new server on it
//	export   copying the weights out of the libtorch plugin (hfmodel.Weights), which
//	         both modes do first
//
// and a LoRA run's sync (rank 32, alpha 64, all seven targets, the base fp32):
//
//	lora-adapter  the trainer's in-place LoRA sync: the adapters out of the plugin
//	              (hfmodel.Model.Adapter), written as a LoRA GGUF, swapped in with
//	              Server.SetAdapter (the base stays loaded)
//	lora-merged   the merged-weight in-place sync it replaces: the merged weights out of
//	              the plugin (hfmodel.Weights, W + s B A per target) and UpdateWeights
//	lora-export   the merged read alone; --sync file costs lora-export + file
//
//	UMAD_SYNC_MODEL=DIR go test ./engine/ -run '^$' -bench Sync -benchtime 3x
func BenchmarkSync(b *testing.B) {
	dir := os.Getenv("UMAD_SYNC_MODEL")
	if dir == "" {
		dir = testmodel.Tiny(b, "qwen2")
	}
	hf := filepath.Join(dir, "hf")
	weights := hfWeights(b, dir)
	var total int64
	for _, v := range weights {
		total += int64(len(v.Data))
	}
	opt := Options{Slots: 16, SeqContext: 5120 + 2048, KVType: KVF16}
	open := func(b *testing.B, path string) *Server {
		s, err := OpenServer(path, Placement{}, opt)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	dst := make([][]byte, len(weights))
	for i, v := range weights {
		dst[i] = make([]byte, len(v.Data))
		copy(dst[i], v.Data) // touch the pages first, as the model's are
	}
	memcpy := func() time.Duration {
		start := time.Now()
		for i, v := range weights {
			copy(dst[i], v.Data)
		}
		return time.Since(start)
	}
	b.Run("memcpy", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			memcpy()
		}
	})
	// On a shared machine the copy's speed moves from minute to minute, so this also
	// times a memcpy right after each update and reports the ratio of the sums.
	b.Run("inplace", func(b *testing.B) {
		s := open(b, filepath.Join(dir, "model.gguf"))
		defer s.Close()
		if err := s.UpdateWeights(weights); err != nil { // reads the GGUF's metadata once
			b.Fatal(err)
		}
		b.SetBytes(total)
		b.ResetTimer()
		var update, copied time.Duration
		for range b.N {
			start := time.Now()
			if err := s.UpdateWeights(weights); err != nil {
				b.Fatal(err)
			}
			update += time.Since(start)
			b.StopTimer()
			copied += memcpy()
			b.StartTimer()
		}
		b.ReportMetric(update.Seconds()/copied.Seconds(), "x-memcpy")
	})
	b.Run("file", func(b *testing.B) {
		staging, out := filepath.Join(b.TempDir(), "hf"), filepath.Join(b.TempDir(), "model.gguf")
		side, err := model.ReadFiles(hf, append([]string{"config.json"}, model.TokenizerFiles...))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.MkdirAll(staging, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := model.WriteFiles(staging, side); err != nil {
			b.Fatal(err)
		}
		named := make([]safetensors.NamedTensor, len(weights))
		for i, v := range weights {
			named[i] = safetensors.NamedTensor{Name: v.Name, DType: v.DType, Shape: v.Shape, Write: gguf.Bytes(v.Data)}
		}
		s := open(b, filepath.Join(dir, "model.gguf"))
		b.SetBytes(total)
		b.ResetTimer()
		for range b.N {
			if err := safetensors.Write(filepath.Join(staging, "model.safetensors"), named, map[string]string{"format": "pt"}); err != nil {
				b.Fatal(err)
			}
			if err := model.HFToGGUF(staging, out, model.HFToGGUFOptions{}); err != nil {
				b.Fatal(err)
			}
			next := open(b, out)
			s.Close()
			s = next
		}
		b.StopTimer()
		s.Close()
	})
	b.Run("export", func(b *testing.B) {
		rt := torchtest.Open(b)
		m, err := hfmodel.Load(rt, hf, torch.ModelOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Free()
		b.SetBytes(total)
		b.ResetTimer()
		for range b.N {
			if _, err := hfmodel.Weights(m.Model); err != nil {
				b.Fatal(err)
			}
		}
	})
	weights, dst = nil, nil // free the full-weight copies for the plugin's LoRA model
	benchLoRASync(b, dir, open)
}

// benchLoRASync times a LoRA run's syncs (see BenchmarkSync) on the model in dir.
func benchLoRASync(b *testing.B, dir string, open func(*testing.B, string) *Server) {
	rt := torchtest.Open(b)
	m, err := hfmodel.Load(rt, filepath.Join(dir, "hf"), torch.ModelOptions{Trainable: true,
		LoRA: trainspec.LoRA{Rank: 32, Alpha: 64, Targets: trainspec.LoRATargets}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Free()
	base := filepath.Join(dir, "model.gguf")
	shape, err := model.ReadGGUFShape(base)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "adapter.gguf")
	adapterSync := func(s *Server) error {
		a, err := m.Adapter()
		if err == nil {
			err = a.WriteGGUF(out, shape)
		}
		if err == nil {
			err = s.SetAdapter(out)
		}
		return err
	}
	mergedSync := func(s *Server) error {
		w, err := hfmodel.Weights(m.Model)
		if err == nil {
			err = s.UpdateWeights(w)
		}
		return err
	}
	for _, c := range []struct {
		name string
		sync func(*Server) error
	}{{"lora-adapter", adapterSync}, {"lora-merged", mergedSync}} {
		b.Run(c.name, func(b *testing.B) {
			s := open(b, base)
			defer s.Close()
			if err := c.sync(s); err != nil { // the first reads the GGUF's metadata once
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := c.sync(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("lora-export", func(b *testing.B) {
		for range b.N {
			if _, err := hfmodel.Weights(m.Model); err != nil {
				b.Fatal(err)
			}
		}
	})
}
