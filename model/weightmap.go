package model

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/safetensors"
)

// WeightMap maps the Hugging Face tensors of one model to the tensors of its GGUF: name,
// ggml dims and type, and bytes, with Llama's q/k rows in llama.cpp's rotary order. The
// file converter (HFToGGUF) and in-place weight updates of a loaded model both go through
// it, so a weight sent either way arrives as the same bytes.
type WeightMap struct {
	layout []TensorSpec
	byHF   map[string]int
	typ    gguf.GGMLType
	tied   bool
}

// GGUFWeight is where one Hugging Face tensor goes in a GGUF.
type GGUFWeight struct {
	Name  string
	Type  gguf.GGMLType
	Dims  []int64 // ggml order, innermost first
	Bytes int64
}

// NewWeightMap maps the tensors of a model of shape s to a GGUF whose matrices are typ
// (F32, F16, BF16 or Q8_0; vectors stay F32).
func NewWeightMap(s Shape, typ gguf.GGMLType) (*WeightMap, error) {
	if _, ok := fileTypeOf[typ]; !ok {
		return nil, fmt.Errorf("output type %v is not supported (want F32, F16, BF16 or Q8_0)", typ)
	}
	m := &WeightMap{layout: s.Tensors(), byHF: map[string]int{}, typ: typ, tied: s.TiedEmbeddings}
	for i, t := range m.layout {
		m.byHF[t.Name] = i
	}
	return m, nil
}

// WeightMapOf is the map of a GGUF file's model: its shape from the metadata, its matrix
// type from general.file_type.
func WeightMapOf(g *gguf.GGUF) (*WeightMap, error) {
	s, err := ggufShape(g)
	if err != nil {
		return nil, err
	}
	ft, err := g.Uint("general.file_type")
	if err != nil {
		return nil, err
	}
	for typ, v := range fileTypeOf {
		if uint64(v) == ft {
			return NewWeightMap(s, typ)
		}
	}
	return nil, fmt.Errorf("general.file_type %d is not one umad writes (F32, F16, BF16 or Q8_0)", ft)
}

// HFNames lists the Hugging Face tensors the model has, in GGUF order.
func (m *WeightMap) HFNames() []string {
	out := make([]string, len(m.layout))
	for i, t := range m.layout {
		out[i] = t.Name
	}
	return out
}

// Ignored reports Hugging Face tensors a GGUF does not hold: rotary inverse frequencies
// (llama.cpp computes them from rope_theta) and a tied model's lm_head (the embedding).
func (m *WeightMap) Ignored(hfName string) bool {
	return strings.HasSuffix(hfName, ".rotary_emb.inv_freq") || (m.tied && hfName == "lm_head.weight")
}

// Target is where the Hugging Face tensor of that name and PyTorch shape goes.
func (m *WeightMap) Target(hfName string, shape []int64) (GGUFWeight, error) {
	i, ok := m.byHF[hfName]
	if !ok {
		return GGUFWeight{}, fmt.Errorf("tensor %q is not part of this model", hfName)
	}
	t := m.layout[i]
	if !slices.Equal(shape, t.Shape) {
		return GGUFWeight{}, fmt.Errorf("tensor %q has shape %v, the model's is %v", hfName, shape, t.Shape)
	}
	w := GGUFWeight{Name: t.GGUFName, Type: matrixType(m.typ, t.Shape), Dims: ggmlDims(t.Shape)}
	n, err := gguf.TensorBytes(w.Type, w.Dims)
	if err != nil {
		return GGUFWeight{}, fmt.Errorf("tensor %q: %w", hfName, err)
	}
	w.Bytes = n
	return w, nil
}

// Convert writes the GGUF bytes of a Hugging Face tensor whose data, of type src (F32,
// F16 or BF16), r streams in PyTorch row order.
func (m *WeightMap) Convert(w io.Writer, hfName string, src gguf.GGMLType, r io.Reader) error {
	i, ok := m.byHF[hfName]
	if !ok {
		return fmt.Errorf("tensor %q is not part of this model", hfName)
	}
	if src != gguf.TypeF32 && src != gguf.TypeF16 && src != gguf.TypeBF16 {
		return fmt.Errorf("tensor %q is %v; only F32, F16 and BF16 convert", hfName, src)
	}
	t := m.layout[i]
	if t.offset != 0 || t.scale != 0 {
		return shiftVector(w, r, src, gguf.TypeF32, t, true)
	}
	return convertRows(w, r, src, matrixType(m.typ, t.Shape), t.Shape, t.PermuteHeads, interleaveRows)
}

// shiftVector converts a norm vector of t from src to dst, HF -> GGUF (toGGUF) with t's
// offset added and then its scale applied, or back: Gemma's norms hold the scale minus 1 in
// HF, the scale in GGUF, and a q-norm may carry the query scalar (Shape.queryNormScale).
// Vectors are small, so it is done in one piece.
func shiftVector(w io.Writer, r io.Reader, src, dst gguf.GGMLType, t TensorSpec, toGGUF bool) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	vals, err := gguf.Dequantize(src, raw)
	if err != nil {
		return err
	}
	scale := t.scale
	if scale == 0 {
		scale = 1
	}
	for i := range vals {
		if toGGUF {
			vals[i] = (vals[i] + t.offset) * scale
		} else {
			vals[i] = vals[i]/scale - t.offset
		}
	}
	out, err := gguf.EncodeTensor(dst, vals)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Check is where a tensor in memory goes, after checking its name, shape, dtype and size.
func (m *WeightMap) Check(v safetensors.TensorView) (GGUFWeight, error) {
	w, err := m.Target(v.Name, v.Shape)
	if err != nil {
		return GGUFWeight{}, err
	}
	src, err := v.DType.GGMLType()
	if err != nil {
		return GGUFWeight{}, fmt.Errorf("tensor %q: %w", v.Name, err)
	}
	n, err := gguf.TensorBytes(src, w.Dims)
	if err != nil {
		return GGUFWeight{}, fmt.Errorf("tensor %q: %w", v.Name, err)
	}
	if int64(len(v.Data)) != n {
		return GGUFWeight{}, fmt.Errorf("tensor %q of shape %v and dtype %s has %d bytes, want %d", v.Name, v.Shape, v.DType, len(v.Data), n)
	}
	return w, nil
}

// Bytes is Convert for a tensor in memory, checked first. When the GGUF holds the data as
// it is (same type, no rows to reorder), v.Data itself comes back.
func (m *WeightMap) Bytes(v safetensors.TensorView) ([]byte, error) {
	w, err := m.Check(v)
	if err != nil {
		return nil, err
	}
	src, _ := v.DType.GGMLType() // checked
	if t := m.layout[m.byHF[v.Name]]; src == w.Type && t.PermuteHeads == 0 && t.offset == 0 && t.scale == 0 {
		return v.Data, nil
	}
	out := bytes.NewBuffer(make([]byte, 0, w.Bytes))
	if err := m.Convert(out, v.Name, src, bytes.NewReader(v.Data)); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", v.Name, err)
	}
	return out.Bytes(), nil
}
