package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// GGMLType is a tensor element type in a GGUF file (ggml's enum ggml_type).
type GGMLType uint32

// The ggml types this package knows the layout of. Only F32, F16, BF16 and Q8_0 can be
// converted to float32; the others can be listed and read as raw bytes.
const (
	TypeF32  GGMLType = 0
	TypeF16  GGMLType = 1
	TypeQ4_0 GGMLType = 2
	TypeQ4_1 GGMLType = 3
	TypeQ5_0 GGMLType = 6
	TypeQ5_1 GGMLType = 7
	TypeQ8_0 GGMLType = 8
	TypeQ8_1 GGMLType = 9
	TypeQ2_K GGMLType = 10
	TypeQ3_K GGMLType = 11
	TypeQ4_K GGMLType = 12
	TypeQ5_K GGMLType = 13
	TypeQ6_K GGMLType = 14
	TypeQ8_K GGMLType = 15
	TypeI8   GGMLType = 24
	TypeI16  GGMLType = 25
	TypeI32  GGMLType = 26
	TypeI64  GGMLType = 27
	TypeF64  GGMLType = 28
	TypeBF16 GGMLType = 30
)

// Q8BlockSize is ggml's QK8_0: Q8_0 stores 32 int8 values with one F16 scale.
const Q8BlockSize = 32

type ggmlLayout struct {
	name       string
	blockElems int64 // elements per block
	blockBytes int64 // bytes per block
}

var ggmlLayouts = map[GGMLType]ggmlLayout{
	TypeF32:  {"F32", 1, 4},
	TypeF16:  {"F16", 1, 2},
	TypeQ4_0: {"Q4_0", 32, 18},
	TypeQ4_1: {"Q4_1", 32, 20},
	TypeQ5_0: {"Q5_0", 32, 22},
	TypeQ5_1: {"Q5_1", 32, 24},
	TypeQ8_0: {"Q8_0", Q8BlockSize, 2 + Q8BlockSize},
	TypeQ8_1: {"Q8_1", 32, 36},
	TypeQ2_K: {"Q2_K", 256, 84},
	TypeQ3_K: {"Q3_K", 256, 110},
	TypeQ4_K: {"Q4_K", 256, 144},
	TypeQ5_K: {"Q5_K", 256, 176},
	TypeQ6_K: {"Q6_K", 256, 210},
	TypeQ8_K: {"Q8_K", 256, 292},
	TypeI8:   {"I8", 1, 1},
	TypeI16:  {"I16", 1, 2},
	TypeI32:  {"I32", 1, 4},
	TypeI64:  {"I64", 1, 8},
	TypeF64:  {"F64", 1, 8},
	TypeBF16: {"BF16", 1, 2},
}

func (t GGMLType) String() string {
	if l, ok := ggmlLayouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// TensorBytes returns the byte size of a tensor with dims ne (ggml order, innermost first),
// or an error if the type is unknown, the row is not a whole number of blocks, or the size
// does not fit in an int64.
func TensorBytes(t GGMLType, ne []int64) (int64, error) {
	l, ok := ggmlLayouts[t]
	if !ok {
		return 0, fmt.Errorf("unsupported tensor type %v", t)
	}
	if len(ne) == 0 { // a scalar is one element
		ne = []int64{1}
	}
	if ne[0]%l.blockElems != 0 {
		return 0, fmt.Errorf("row of %d elements is not a multiple of the %v block size %d", ne[0], t, l.blockElems)
	}
	for _, n := range ne {
		if n < 0 {
			return 0, fmt.Errorf("negative dimension in %v", ne)
		}
	}
	if ne[0]/l.blockElems > math.MaxInt64/l.blockBytes {
		return 0, fmt.Errorf("tensor size overflows: dims %v", ne)
	}
	size := ne[0] / l.blockElems * l.blockBytes
	for _, n := range ne[1:] {
		if n != 0 && size > math.MaxInt64/n {
			return 0, fmt.Errorf("tensor size overflows: dims %v", ne)
		}
		size *= n
	}
	return size, nil
}

// Dequantize converts raw tensor bytes of type t to float32.
func Dequantize(t GGMLType, raw []byte) ([]float32, error) {
	switch t {
	case TypeF32:
		out := make([]float32, len(raw)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	case TypeF16, TypeBF16:
		conv := F16ToF32
		if t == TypeBF16 {
			conv = BF16ToF32
		}
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = conv(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		return out, nil
	case TypeQ8_0:
		const blockBytes = 2 + Q8BlockSize
		out := make([]float32, 0, len(raw)/blockBytes*Q8BlockSize)
		for b := 0; b+blockBytes <= len(raw); b += blockBytes {
			scale := F16ToF32(binary.LittleEndian.Uint16(raw[b:]))
			for _, q := range raw[b+2 : b+blockBytes] {
				out = append(out, float32(int8(q))*scale)
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("cannot convert %v to F32", t)
	}
}

// EncodableType is the type EncodeTensor writes that name names, in any case: f32, f16,
// bf16 or q8_0.
func EncodableType(name string) (GGMLType, bool) {
	for _, t := range []GGMLType{TypeF32, TypeF16, TypeBF16, TypeQ8_0} {
		if strings.EqualFold(name, t.String()) {
			return t, true
		}
	}
	return 0, false
}

// EncodeTensor converts float32 values to the bytes of a tensor of type t (F32, F16, BF16 or
// Q8_0). Q8_0 needs a multiple of 32 values and quantises each block as ggml's reference
// quantiser does: scale = max|x|/127 stored as F16, values rounded to the nearest int8.
func EncodeTensor(t GGMLType, values []float32) ([]byte, error) {
	switch t {
	case TypeF32:
		out := make([]byte, 4*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	case TypeF16, TypeBF16:
		conv := F32ToF16
		if t == TypeBF16 {
			conv = F32ToBF16
		}
		out := make([]byte, 2*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint16(out[2*i:], conv(v))
		}
		return out, nil
	case TypeQ8_0:
		if len(values)%Q8BlockSize != 0 {
			return nil, fmt.Errorf("Q8_0 needs a multiple of %d values, got %d", Q8BlockSize, len(values))
		}
		out := make([]byte, 0, len(values)/Q8BlockSize*(2+Q8BlockSize))
		for b := 0; b < len(values); b += Q8BlockSize {
			out = appendQ8Block(out, values[b:b+Q8BlockSize])
		}
		return out, nil
	default:
		return nil, fmt.Errorf("cannot encode F32 values as %v", t)
	}
}

func appendQ8Block(out []byte, block []float32) []byte {
	var amax float32
	for _, v := range block {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var inv float32
	if d != 0 {
		inv = 1 / d
	}
	out = binary.LittleEndian.AppendUint16(out, F32ToF16(d))
	for _, v := range block {
		out = append(out, byte(int8(math.Round(float64(v*inv)))))
	}
	return out
}
