package gguf

import "math"

// F32ToF16 converts to IEEE 754 half precision, rounding to nearest even, keeping subnormals,
// infinities and NaN (a NaN stays a quiet NaN).
func F32ToF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int32(bits>>23) & 0xff
	mant := bits & 0x7fffff

	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // overflows half: Inf
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		halfExp := uint32(exp-127+15) << 10
		h := halfExp | mant>>13
		// Round to nearest even on the 13 dropped bits; a carry into the exponent is correct
		// (it may round up to Inf).
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	case exp-127 >= -25: // subnormal half (or rounds up to the smallest one)
		m := mant | 0x800000 // implicit leading one
		shift := uint32(-(exp - 127) - 14 + 13)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	default: // underflows to signed zero
		return sign
	}
}

// F16ToF32 converts an IEEE 754 half to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
}

// F32ToBF16 converts to bfloat16 the way ggml and PyTorch do: round to nearest even, NaN kept
// quiet.
func F32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	return uint16((bits + 0x7fff + (bits>>16)&1) >> 16)
}

// BF16ToF32 converts bfloat16 to float32 exactly.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}
