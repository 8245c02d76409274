package trainspec

import (
	"fmt"
	"strings"
)

// Precision is how a model computes, as --dtype names it.
type Precision string

const (
	// PrecisionF32 computes in the parameter dtype (f32; f64 for gradient checks). "" is the same.
	PrecisionF32 Precision = "f32"
	// PrecisionBF16 is mixed precision: f32 master weights, gradients and AdamW state, each
	// weight cast to bf16 where it is used (matmuls and activations in bf16, norms and softmax
	// in f32). Frozen tensors (a reference model, a LoRA base) are stored in bf16.
	PrecisionBF16 Precision = "bf16"
)

// ParsePrecision reads f32 or bf16 ("" is f32).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.TrimSpace(s)); p {
	case "", PrecisionF32:
		return PrecisionF32, nil
	case PrecisionBF16:
		return p, nil
	}
	return "", fmt.Errorf("dtype %q: want f32 or bf16", s)
}
