package model

// The weights a shape has, for whoever sizes a model without loading one (the memory plan).

// TensorSpec is one weight of a checkpoint: its Hugging Face name and its shape (PyTorch
// order).
type TensorSpec struct {
	Name  string
	Shape []int64
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
		out = append(out, TensorSpec{Name: t.hfName, Shape: t.shape})
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
func (s Shape) GGUFBytes(typ GGMLType) (int64, error) {
	var n int64
	for _, t := range s.Tensors() {
		b, err := ggmlTensorBytes(matrixType(typ, t.Shape), ggmlDims(t.Shape))
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
