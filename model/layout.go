package model

// The weights a shape has, for whoever sizes a model without loading one (the memory plan).

import (
	"errors"
	"slices"

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
	var out []TensorSpec
	for _, t := range tinyTensors(s, 0) {
		out = append(out, TensorSpec{Name: t.hfName, Shape: t.shape, GGUFName: t.ggufName, PermuteHeads: t.permuteHeads})
	}
	return out
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
