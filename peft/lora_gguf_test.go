package peft

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

func TestLoRAGGUF(t *testing.T) {
	for _, arch := range []model.Arch{model.ArchQwen2, model.ArchQwen3, model.ArchLlama} {
		a, s := randomLoRA(t, arch, 4)
		a.RSLoRA = arch == model.ArchQwen3
		path := filepath.Join(t.TempDir(), "lora.gguf")
		if err := a.WriteGGUF(path, s); err != nil {
			t.Fatal(err)
		}
		if err := CheckLoRAGGUF(path, s); err != nil {
			t.Fatal(err)
		}
		g, err := gguf.OpenGGUF(path)
		if err != nil {
			t.Fatal(err)
		}
		alpha, err := g.Float(loraAlphaKey)
		if err != nil {
			t.Fatal(err)
		}
		// llama.cpp scales by alpha/rank: that must be PEFT's scale.
		if got := alpha / float64(a.Rank); math.Abs(got-a.Scale()) > 1e-6*a.Scale() {
			t.Errorf("%s: llama.cpp would scale by %v, PEFT by %v", arch, got, a.Scale())
		}
		if len(g.Tensors) != 2*len(a.Pairs) {
			t.Errorf("%s: %d tensors for %d pairs", arch, len(g.Tensors), len(a.Pairs))
		}
		for _, c := range []struct {
			name  string
			key   LoRAKey
			dims  []int64
			check func(got []float32, p LoRAPair) bool
		}{
			{"blk.1.attn_v.weight.lora_a", LoRAKey{1, "v_proj"}, []int64{int64(s.Hidden), 4}, func(got []float32, p LoRAPair) bool { return slices.Equal(got, p.A) }},
			{"blk.0.ffn_down.weight.lora_b", LoRAKey{0, "down_proj"}, []int64{4, int64(s.Hidden)}, func(got []float32, p LoRAPair) bool { return slices.Equal(got, p.B) }},
			{"blk.1.attn_k.weight.lora_b", LoRAKey{1, "k_proj"}, []int64{4, int64(s.KVHeads * s.HeadDim)}, func(got []float32, p LoRAPair) bool {
				if arch != model.ArchLlama {
					return slices.Equal(got, p.B)
				}
				// Llama: each head's rows in llama.cpp's rotary order, as the weight's: row
				// 2j+i of a head is its HF row i*d/2+j.
				want := make([]float32, 0, len(p.B))
				d, cols := s.HeadDim, 4
				for h := range s.KVHeads {
					head := p.B[h*d*cols : (h+1)*d*cols]
					for r := range d {
						old := r%2*d/2 + r/2
						want = append(want, head[old*cols:(old+1)*cols]...)
					}
				}
				return slices.Equal(got, want) && !slices.Equal(got, p.B)
			}},
		} {
			info, ok := g.Tensor(c.name)
			if !ok || info.Type != gguf.TypeF32 || !slices.Equal(info.Dims, c.dims) {
				t.Fatalf("%s: %s: %+v (present %v), want F32 dims %v", arch, c.name, info, ok, c.dims)
			}
			got, err := g.ReadTensorF32(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(got, a.Pairs[c.key]) {
				t.Errorf("%s: %s holds other values", arch, c.name)
			}
		}
		g.Close()
	}
	// rsLoRA's alpha x sqrt(rank) can leave float32's range that alpha itself is within.
	a, s := randomLoRA(t, model.ArchQwen2, 4)
	a.RSLoRA, a.Alpha = true, math.MaxFloat32
	if err := a.WriteGGUF(filepath.Join(t.TempDir(), "lora.gguf"), s); err == nil || !strings.Contains(err.Error(), "outside float32's range") {
		t.Errorf("rsLoRA alpha beyond float32: %v", err)
	}
}

// writeGGUFFile writes a GGUF of the given metadata and F32 zero tensors.
func writeGGUFFile(t *testing.T, kvs []gguf.KV, tensors map[string][]int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.gguf")
	w, err := gguf.CreateGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		dims := tensors[name]
		if err := w.AddTensor(name, gguf.TypeF32, dims, make([]byte, 4*dims[0]*dims[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckLoRAGGUFRefuses(t *testing.T) {
	a, s := randomLoRA(t, model.ArchQwen2, 4)
	good := filepath.Join(t.TempDir(), "lora.gguf")
	if err := a.WriteGGUF(good, s); err != nil {
		t.Fatal(err)
	}
	q3, _ := model.DefaultShape(model.ArchQwen3)
	wide := s
	wide.FFN = 256
	deep := s
	deep.Layers = 1
	head := []gguf.KV{{Key: generalArch, Value: "qwen2"}, {Key: generalType, Value: "adapter"}, {Key: adapterTypeKV, Value: "lora"}, {Key: loraAlphaKey, Value: float32(8)}}
	hand := func(kvs []gguf.KV, tensors map[string][]int64) string { return writeGGUFFile(t, kvs, tensors) }
	cases := []struct {
		name string
		path string
		base model.Shape
		want string
	}{
		{"other arch", good, q3, "the adapter is for qwen2, the model is qwen3"},
		{"wider ffn", good, wide, "blk.0.ffn_gate.weight: the adapter maps 64 to 128 features, the model's weight 64 to 256"},
		{"fewer layers", good, deep, "adapts blk.1."},
		{"not an adapter", hand([]gguf.KV{{Key: generalArch, Value: "qwen2"}}, map[string][]int64{"blk.0.attn_q.weight": {64, 64}}), s, `general.type is "", want "adapter"`},
		{"rank mismatch", hand(head, map[string][]int64{"blk.0.attn_q.weight.lora_a": {64, 4}, "blk.0.attn_q.weight.lora_b": {8, 64}}), s, "blk.0.attn_q.weight: lora_a has rank 4, lora_b 8"},
		{"half a pair", hand(head, map[string][]int64{"blk.0.attn_q.weight.lora_a": {64, 4}}), s, "blk.0.attn_q.weight has only one of lora_a and lora_b"},
		{"foreign tensor", hand(head, map[string][]int64{"blk.0.attn_q.weight": {64, 64}}), s, `tensor "blk.0.attn_q.weight" is neither a lora_a nor a lora_b`},
		{"embedding", hand(head, map[string][]int64{"token_embd.weight.lora_a": {64, 4}}), s, "which a qwen2 model of 2 layers has no LoRA target for"},
		{"non-finite alpha", hand([]gguf.KV{{Key: generalArch, Value: "qwen2"}, {Key: generalType, Value: "adapter"}, {Key: adapterTypeKV, Value: "lora"}, {Key: loraAlphaKey, Value: float32(math.NaN())}},
			map[string][]int64{"blk.0.attn_q.weight.lora_a": {64, 4}}), s, "adapter.lora.alpha = NaN"},
	}
	for _, c := range cases {
		if err := CheckLoRAGGUF(c.path, c.base); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// WriteGGUF refuses a base the adapter does not fit before writing anything.
	if err := a.WriteGGUF(filepath.Join(t.TempDir(), "x.gguf"), wide); err == nil || !strings.Contains(err.Error(), "maps 64 to 128 features") {
		t.Errorf("write for a wider base: %v", err)
	}
}

func TestPEFTToGGUFAndMerge(t *testing.T) {
	dir := t.TempDir()
	if err := model.WriteTiny(dir, model.TinyOptions{Arch: "llama", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	a, s := randomLoRA(t, model.ArchLlama, 2)
	peft := filepath.Join(dir, "adapter")
	if err := a.WritePEFT(peft); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "lora.gguf")
	if err := ToGGUF(peft, filepath.Join(dir, "model.gguf"), out); err != nil {
		t.Fatal(err)
	}
	if err := CheckLoRAGGUF(out, s); err != nil {
		t.Fatal(err)
	}
	q3 := t.TempDir()
	if err := model.WriteTiny(q3, model.TinyOptions{Arch: "qwen3", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := ToGGUF(peft, filepath.Join(q3, "model.gguf"), out); err == nil || !strings.Contains(err.Error(), "wrong base model?") {
		t.Errorf("a llama adapter onto a qwen3 base: %v", err)
	}

	merged := filepath.Join(dir, "merged")
	if err := Merge(filepath.Join(dir, "hf"), a, merged); err != nil {
		t.Fatal(err)
	}
	base, err := safetensors.Open(filepath.Join(dir, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	got, err := safetensors.Open(merged)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if !slices.Equal(base.Names(), got.Names()) {
		t.Fatalf("merged tensors %v, base %v", got.Names(), base.Names())
	}
	read := func(st *safetensors.File, name string) []float32 {
		tv, err := st.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tv.F32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, name := range []string{"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"} {
		if !slices.Equal(read(base, name), read(got, name)) {
			t.Errorf("%s changed", name)
		}
	}
	w := read(base, "model.layers.1.self_attn.q_proj.weight")
	if err := MergeLoRA(w, a.Pairs[LoRAKey{1, "q_proj"}], a.Scale()); err != nil {
		t.Fatal(err)
	}
	if m := read(got, "model.layers.1.self_attn.q_proj.weight"); !slices.Equal(m, w) || slices.Equal(m, read(base, "model.layers.1.self_attn.q_proj.weight")) {
		t.Error("q_proj of layer 1 is not the base plus the update")
	}
	for _, f := range []string{"config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(merged, f)); err != nil {
			t.Error(err)
		}
	}
	if err := model.HFToGGUF(merged, filepath.Join(dir, "merged.gguf"), model.HFToGGUFOptions{}); err != nil {
		t.Fatalf("the merged checkpoint does not convert: %v", err)
	}
}
