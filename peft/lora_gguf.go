package peft

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/model"
)

// llama.cpp's LoRA GGUF (src/llama-adapter.cpp): general.type "adapter", adapter.type "lora",
// general.architecture the base's, and per adapted weight W a pair W.lora_a, the PEFT A
// ([rank, in], ggml dims [in, rank]), and W.lora_b, the PEFT B ([out, rank]). llama.cpp adds
// (alpha/rank) * B(Ax) to Wx, rank being lora_b's inner dimension.
const (
	loraAlphaKey  = "adapter.lora.alpha"
	loraSuffixA   = ".lora_a"
	loraSuffixB   = ".lora_b"
	loraGGUFType  = "adapter"
	loraGGUFKind  = "lora"
	generalArch   = "general.architecture"
	generalType   = "general.type"
	adapterTypeKV = "adapter.type"
)

// loraWeight is a weight an adapter may adapt: its key and its tensor in the converter's
// layout (which knows Llama's q/k row order).
type loraWeight struct {
	key LoRAKey
	t   model.TensorSpec
}

// loraLayout maps the GGUF name of every weight an adapter may adapt in a model of shape s
// to it.
func loraLayout(s model.Shape) map[string]loraWeight {
	byHF := map[string]model.TensorSpec{}
	for _, t := range s.Tensors() {
		byHF[t.Name] = t
	}
	out := map[string]loraWeight{}
	for l := range s.Layers {
		for _, target := range LoRATargets {
			t := byHF[loraModuleName(l, target)+".weight"]
			out[t.GGUFName] = loraWeight{LoRAKey{l, target}, t}
		}
	}
	return out
}

// WriteGGUF writes the adapter as llama.cpp's LoRA GGUF (F32) for a base model of shape s,
// after checking that it fits. For Llama, lora_b's rows get the permutation the converter
// gives q_proj and k_proj, so that B @ A stays the update of the permuted weight.
func (a *LoRAAdapter) WriteGGUF(path string, s model.Shape) error {
	if err := a.writeGGUF(path, s); err != nil {
		return fmt.Errorf("write lora gguf %s: %w", path, err)
	}
	return nil
}

func (a *LoRAAdapter) writeGGUF(path string, s model.Shape) error {
	if err := a.CheckBase(s); err != nil {
		return err
	}
	w, err := gguf.CreateGGUF(path)
	if err != nil {
		return err
	}
	// llama.cpp scales by alpha/rank; rsLoRA's alpha/sqrt(rank) is that with alpha*sqrt(rank).
	alpha := a.Alpha
	if a.RSLoRA {
		alpha *= math.Sqrt(float64(a.Rank))
	}
	if !fitsFloat32(alpha) {
		return fmt.Errorf("lora: rsLoRA's alpha %g x sqrt(rank %d) is outside float32's range", a.Alpha, a.Rank)
	}
	for _, kv := range []gguf.KV{
		{Key: generalArch, Value: s.Arch.GGUF()},
		{Key: generalType, Value: loraGGUFType},
		{Key: adapterTypeKV, Value: loraGGUFKind},
		{Key: loraAlphaKey, Value: float32(alpha)},
		{Key: "general.name", Value: a.BaseModel},
	} {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	byKey := map[LoRAKey]model.TensorSpec{}
	for _, e := range loraLayout(s) {
		byKey[e.key] = e.t
	}
	r := int64(a.Rank)
	for _, k := range a.Keys() {
		p, t := a.Pairs[k], byKey[k]
		if err := w.AddTensorFunc(t.GGUFName+loraSuffixA, gguf.TypeF32, []int64{int64(p.In), r}, f32Writer(p.A)); err != nil {
			return err
		}
		b := f32Writer(p.B)
		if t.PermuteHeads > 0 {
			b = permutedRows(p.B, []int64{int64(p.Out), r}, t.PermuteHeads)
		}
		if err := w.AddTensorFunc(t.GGUFName+loraSuffixB, gguf.TypeF32, []int64{r, int64(p.Out)}, b); err != nil {
			return err
		}
	}
	return w.Close()
}

// permutedRows writes an F32 matrix with each head's rows in llama.cpp's rotary order, as the
// converter writes Llama's q/k weights.
func permutedRows(v []float32, shape []int64, heads int) gguf.WriteFunc {
	return func(w io.Writer) error {
		var raw bytes.Buffer
		if err := f32Writer(v)(&raw); err != nil {
			return err
		}
		return model.InterleaveHeads(w, &raw, shape, heads)
	}
}

// ToGGUF converts a PEFT LoRA adapter directory to llama.cpp's LoRA GGUF for the base
// model in the GGUF file base.
func ToGGUF(peftDir, base, out string) error {
	s, err := model.ReadGGUFShape(base)
	if err != nil {
		return fmt.Errorf("convert %s to lora gguf: base model: %w", peftDir, err)
	}
	a, err := Read(peftDir)
	if err != nil {
		return err
	}
	if err := a.CheckBase(s); err != nil {
		return fmt.Errorf("convert %s to lora gguf for %s: %w", peftDir, filepath.Base(base), err)
	}
	return a.WriteGGUF(out, s)
}

// CheckLoRAGGUF checks a LoRA GGUF against a base model of shape s the way llama.cpp will
// use it, with errors that name the problem: the file's type and architecture, alpha, and
// that every tensor is half of a pair of some weight of the base, with A [in, rank] and
// B [rank, out] (ggml order) of one rank.
func CheckLoRAGGUF(path string, s model.Shape) error {
	if err := checkLoRAGGUF(path, s); err != nil {
		return fmt.Errorf("lora adapter %s: %w", path, err)
	}
	return nil
}

func checkLoRAGGUF(path string, s model.Shape) error {
	g, err := gguf.OpenGGUF(path)
	if err != nil {
		return err
	}
	defer g.Close()
	for _, kv := range []struct{ key, want string }{{generalType, loraGGUFType}, {adapterTypeKV, loraGGUFKind}} {
		if v, err := g.String(kv.key); err != nil || v != kv.want {
			return fmt.Errorf("%s is %q, want %q: not a LoRA adapter (convert one with umad convert lora2gguf)", kv.key, v, kv.want)
		}
	}
	arch, err := g.String(generalArch)
	if err != nil {
		return err
	}
	if arch != s.Arch.GGUF() {
		return fmt.Errorf("the adapter is for %s, the model is %s", arch, s.Arch.GGUF())
	}
	if kv, ok := g.Lookup(loraAlphaKey); ok {
		alpha, isF32 := kv.Value.(float32)
		if !isF32 || math.IsNaN(float64(alpha)) || math.IsInf(float64(alpha), 0) || alpha < 0 {
			return fmt.Errorf("%s = %v, want a finite non-negative float32", loraAlphaKey, kv.Value)
		}
	}
	layout := loraLayout(s)
	type pair struct{ a, b []int64 }
	pairs := map[string]*pair{}
	for _, t := range g.Tensors {
		base, isA := strings.CutSuffix(t.Name, loraSuffixA)
		if !isA {
			var isB bool
			if base, isB = strings.CutSuffix(t.Name, loraSuffixB); !isB {
				return fmt.Errorf("tensor %q is neither a lora_a nor a lora_b", t.Name)
			}
		}
		if _, ok := layout[base]; !ok {
			return fmt.Errorf("tensor %q adapts %s, which a %s model of %d layers has no LoRA target for", t.Name, base, s.Arch, s.Layers)
		}
		if len(t.Dims) != 2 {
			return fmt.Errorf("tensor %q has dims %v, want a matrix", t.Name, t.Dims)
		}
		p := pairs[base]
		if p == nil {
			p = &pair{}
			pairs[base] = p
		}
		if isA {
			p.a = t.Dims
		} else {
			p.b = t.Dims
		}
	}
	if len(pairs) == 0 {
		return fmt.Errorf("no LoRA tensors")
	}
	// In layer and target order, so the first problem reported does not depend on map order.
	bases := slices.SortedFunc(maps.Keys(pairs), func(x, y string) int { return compareLoRAKeys(layout[x].key, layout[y].key) })
	for _, base := range bases {
		p := pairs[base]
		if p.a == nil || p.b == nil {
			return fmt.Errorf("%s has only one of lora_a and lora_b", base)
		}
		t := layout[base].t
		in, out := t.Shape[1], t.Shape[0]
		r := p.b[0]
		switch {
		case r < 1 || r > MaxLoRARank:
			return fmt.Errorf("%s: rank %d must be in 1..%d", base, r, MaxLoRARank)
		case p.a[1] != r:
			return fmt.Errorf("%s: lora_a has rank %d, lora_b %d", base, p.a[1], r)
		case p.a[0] != in || p.b[1] != out:
			return fmt.Errorf("%s: the adapter maps %d to %d features, the model's weight %d to %d (wrong base model?)", base, p.a[0], p.b[1], in, out)
		}
	}
	return nil
}
