package gguf

import (
	"math"
	"testing"
)

func TestF32ToF16(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"largest finite half", 65504, 0x7bff},
		{"rounds up past the largest half to Inf", 65520, 0x7c00},
		{"just below the rounding point stays finite", 65519, 0x7bff},
		{"overflow is Inf", 1e10, 0x7c00},
		{"smallest normal half", float32(math.Ldexp(1, -14)), 0x0400},
		{"smallest subnormal half", float32(math.Ldexp(1, -24)), 0x0001},
		{"half the smallest subnormal ties to even zero", float32(math.Ldexp(1, -25)), 0x0000},
		{"1.5 x smallest subnormal ties to even 2", float32(math.Ldexp(3, -25)), 0x0002},
		{"tiny underflows to signed zero", -1e-30, 0x8000},
		{"0.1 rounds to nearest", 0.1, 0x2e66},
		{"tie between 1 and next half goes to even 1", 1 + float32(math.Ldexp(1, -11)), 0x3c00},
		{"tie above odd mantissa goes up", 1 + float32(math.Ldexp(3, -11)), 0x3c02},
		{"positive Inf", float32(math.Inf(1)), 0x7c00},
		{"negative Inf", float32(math.Inf(-1)), 0xfc00},
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.in); got != tc.want {
			t.Errorf("%s: F32ToF16(%g) = %#04x, want %#04x", tc.name, tc.in, got, tc.want)
		}
	}
	if h := F32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN became %#04x, want a NaN", h)
	}
}

// Every finite half converts to float32 and back unchanged: checks both directions over the
// whole domain, subnormals included.
func TestF16RoundTripAllValues(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decoded to NaN", h)
			}
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
	if got := F16ToF32(0x0001); got != float32(math.Ldexp(1, -24)) {
		t.Errorf("smallest subnormal decodes to %g", got)
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"minus two", -2, 0xc000},
		{"tie rounds to even (down)", math.Float32frombits(0x3f808000), 0x3f80},
		{"tie rounds to even (up)", math.Float32frombits(0x3f818000), 0x3f82},
		{"above the tie rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"Inf stays Inf", float32(math.Inf(1)), 0x7f80},
		{"signalling NaN is made quiet", math.Float32frombits(0x7f800001), 0x7fc0},
	}
	for _, tc := range tests {
		if got := F32ToBF16(tc.in); got != tc.want {
			t.Errorf("%s: F32ToBF16 = %#04x, want %#04x", tc.name, got, tc.want)
		}
	}
	for _, v := range []float32{1, -3.5, 0.015625, float32(math.Ldexp(1, 100))} {
		if got := BF16ToF32(F32ToBF16(v)); got != v {
			t.Errorf("%g is exact in bf16 but came back as %g", v, got)
		}
	}
}
