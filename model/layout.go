package model

// The weights a shape has, under their Hugging Face and GGUF names: the layout the converter,
// the weight map and the tiny models share, and the sizes for whoever sizes a model without
// loading one (the memory plan).

import (
	"errors"
	"slices"
	"strconv"

	"github.com/umad-dev/umad/gguf"
)

// TensorSpec is one weight of a checkpoint: its Hugging Face name, its shape (PyTorch
// order) and how the converter writes it to GGUF.
type TensorSpec struct {
	Name  string
	Shape []int64
	// GGUFName is the tensor's name in llama.cpp's GGUF.
	GGUFName string
	// PermuteHeads > 0 marks Llama's q/k projections, whose rows of each of that many heads
	// the GGUF holds in llama.cpp's rotary order (InterleaveHeads).
	PermuteHeads int
	norm         bool // a norm weight (~1) rather than a projection (~0)
	// offset is added to a norm weight in the GGUF (Gemma's HF weights are the scale - 1).
	offset float32
	// scale multiplies a q-norm weight in the GGUF after its offset (Shape.queryNormScale):
	// llama.cpp's attention scale is fixed, so a Gemma 3 query scalar it does not use is
	// folded into q. 0: none.
	scale float32
}

// Elems is the tensor's element count.
func (t TensorSpec) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensors lists the shape's checkpoint weights in checkpoint order (tied embeddings once).
func (s Shape) Tensors() []TensorSpec {
	H, V, F, D := int64(s.Hidden), int64(s.Vocab), int64(s.FFN), int64(s.HeadDim)
	q, kv := int64(s.Heads)*D, int64(s.KVHeads)*D
	d, _ := s.Arch.desc()
	permQ, permK := 0, 0
	if d.PermuteQK {
		permQ, permK = s.Heads, s.KVHeads
	}
	var ts []TensorSpec
	add := func(hf, gguf string, norm bool, perm int, shape ...int64) {
		t := TensorSpec{Name: hf, GGUFName: gguf, Shape: shape, norm: norm, PermuteHeads: perm}
		if norm {
			t.offset = float32(d.NormOffset)
		}
		ts = append(ts, t)
	}
	add("model.embed_tokens.weight", "token_embd.weight", false, 0, V, H)
	for i := range s.Layers {
		hp := "model.layers." + strconv.Itoa(i) + "."
		gp := "blk." + strconv.Itoa(i) + "."
		add(hp+"input_layernorm.weight", gp+"attn_norm.weight", true, 0, H)
		add(hp+"self_attn.q_proj.weight", gp+"attn_q.weight", false, permQ, q, H)
		add(hp+"self_attn.k_proj.weight", gp+"attn_k.weight", false, permK, kv, H)
		add(hp+"self_attn.v_proj.weight", gp+"attn_v.weight", false, 0, kv, H)
		if s.QKVBias {
			add(hp+"self_attn.q_proj.bias", gp+"attn_q.bias", false, permQ, q)
			add(hp+"self_attn.k_proj.bias", gp+"attn_k.bias", false, permK, kv)
			add(hp+"self_attn.v_proj.bias", gp+"attn_v.bias", false, 0, kv)
		}
		add(hp+"self_attn.o_proj.weight", gp+"attn_output.weight", false, 0, H, q)
		if d.QKNorm {
			add(hp+"self_attn.q_norm.weight", gp+"attn_q_norm.weight", true, 0, D)
			if c := s.queryNormScale(); c != 1 {
				ts[len(ts)-1].scale = c
			}
			add(hp+"self_attn.k_norm.weight", gp+"attn_k_norm.weight", true, 0, D)
		}
		if d.SandwichNorm {
			add(hp+"post_attention_layernorm.weight", gp+"post_attention_norm.weight", true, 0, H)
			add(hp+"pre_feedforward_layernorm.weight", gp+"ffn_norm.weight", true, 0, H)
		} else {
			add(hp+"post_attention_layernorm.weight", gp+"ffn_norm.weight", true, 0, H)
		}
		add(hp+"mlp.gate_proj.weight", gp+"ffn_gate.weight", false, 0, F, H)
		add(hp+"mlp.up_proj.weight", gp+"ffn_up.weight", false, 0, F, H)
		add(hp+"mlp.down_proj.weight", gp+"ffn_down.weight", false, 0, H, F)
		if d.SandwichNorm {
			add(hp+"post_feedforward_layernorm.weight", gp+"post_ffw_norm.weight", true, 0, H)
		}
	}
	add("model.norm.weight", "output_norm.weight", true, 0, H)
	if !s.TiedEmbeddings {
		add("lm_head.weight", "output.weight", false, 0, V, H)
	}
	return ts
}

// ggmlDims reverses a PyTorch shape into ggml order; the bytes stay the same.
func ggmlDims(shape []int64) []int64 {
	d := slices.Clone(shape)
	slices.Reverse(d)
	return d
}

// Params is the parameter count (tied embeddings counted once).
func (s Shape) Params() int64 {
	var n int64
	for _, t := range s.Tensors() {
		n += t.Elems()
	}
	return n
}

// GGUFBytes is the tensor data HFToGGUF writes for the shape with matrices of type typ
// (vectors stay F32; Llama 3 scaling adds rope_freqs), which is what llama.cpp loads.
func (s Shape) GGUFBytes(typ gguf.GGMLType) (int64, error) {
	var n int64
	for _, t := range s.Tensors() {
		b, err := gguf.TensorBytes(matrixType(typ, t.Shape), ggmlDims(t.Shape))
		if err != nil {
			return 0, err
		}
		n += b
	}
	if s.RopeScaling != nil {
		n += 4 * int64(s.HeadDim/2)
	}
	return n, nil
}

// embedTable is the token embedding's checkpoint name.
const embedTable = "model.embed_tokens.weight"

// looked is whether a token only looks its row of t up: the embedding table, unless the
// lm_head shares it (tied), which every token multiplies.
func (s Shape) looked(t TensorSpec) bool { return t.Name == embedTable && !s.TiedEmbeddings }

// MatmulParams is the weight elements each token goes through as a matrix product: every
// matrix but an untied embedding table. 2 x MatmulParams is a token's forward FLOPs (less
// attention's own products).
func (s Shape) MatmulParams() int64 {
	var n int64
	for _, t := range s.Tensors() {
		if len(t.Shape) == 2 && !s.looked(t) {
			n += t.Elems()
		}
	}
	return n
}

// MatmulShapes are the distinct [out, in] shapes of the matrices MatmulParams counts: the
// products a token's forward and backward passes are made of.
func (s Shape) MatmulShapes() [][2]int64 {
	var out [][2]int64
	for _, t := range s.Tensors() {
		if len(t.Shape) == 2 && !s.looked(t) {
			if sh := [2]int64{t.Shape[0], t.Shape[1]}; !slices.Contains(out, sh) {
				out = append(out, sh)
			}
		}
	}
	return out
}

// DecodeBytes is what llama.cpp reads of the weights per decode step with matrices of
// type typ: GGUFBytes less an untied embedding table.
func (s Shape) DecodeBytes(typ gguf.GGMLType) (int64, error) {
	n, err := s.GGUFBytes(typ)
	for _, t := range s.Tensors() {
		if s.looked(t) {
			b, terr := gguf.TensorBytes(matrixType(typ, t.Shape), ggmlDims(t.Shape))
			n, err = n-b, errors.Join(err, terr)
		}
	}
	return n, err
}
