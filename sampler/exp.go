package sampler

import "math"

// expSteps is the number of table steps per octave: e^y = 2^(k/expSteps) e^r.
// Sixteen entries fit in two AVX-512 registers, so the kernel looks them up
// with one permute instead of a gather from memory.
const (
	expSteps     = 16
	expStepShift = 4 // log2(expSteps)
)

// expTable[j] holds the bits of 2^(j/16), built with math.Exp2, so each
// entry is within half an ulp of the true value.
var expTable = func() (t [expSteps]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / expSteps))
	}
	return t
}()

const (
	// expFloor clamps the argument of expNeg: e^-700 is far below any sum
	// that contains the maximum term e^0 = 1, and 2^k stays a normal number.
	expFloor = -700
	// roundMagic is 1.5 * 2^52: adding it rounds a float64 of magnitude below
	// 2^51 to an integer held in the low mantissa bits.
	roundMagic  = 0x1.8p52
	stepsPerNat = expSteps * math.Log2E
	natsPerStep = math.Ln2 / expSteps
	// expUnbias turns (bits of roundMagic+k)>>4 into k>>4: it subtracts
	// 0x4338000000000000>>4 modulo 2^64 (only the low 12 bits survive the
	// shift into the exponent field).
	expUnbias = 1<<64 - 0x4338000000000000>>expStepShift
)

// expNeg returns e^y for y in [expFloor, 0] with a relative error below 1e-12
// (TestExpNegAccuracy), several times faster than math.Exp. It splits
// y = k ln2/16 + r with |r| <= ln2/32, so e^y = 2^(k>>4) * 2^((k&15)/16) * e^r,
// and e^r is a quintic whose truncation error is r^6/720 < 1.5e-13; the
// rounding of k*ln2/16 (|k| < 2^14) costs at most 8e-14 relative at y = -700.
// The multiply-adds are fused (math.FMA, one rounding each; the kernels use
// the same fused instructions). Fused or not is fixed, never the compiler's
// choice: the result is bit-identical on every platform and build, so draws
// reproduce exactly.
func expNeg(y float64) float64 {
	t := math.FMA(y, stepsPerNat, roundMagic)
	r := math.FMA(-(t - roundMagic), natsPerStep, y)
	p := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(r, 1.0/120, 1.0/24), r, 1.0/6), r, 0.5), r, 1), r, 1)
	// t's low mantissa bits hold k in two's complement; 2^(k>>4) is applied
	// by adding k>>4 to the exponent field of the table entry 2^((k&15)/16).
	k := math.Float64bits(t)
	return float64(math.Float64frombits(expTable[k&(expSteps-1)]+(k>>expStepShift+expUnbias)<<52) * p)
}

const (
	// weightBits is the fixed-point precision of the weights that top-p and
	// the draw add up: the most probable token weighs 2^40 exactly.
	weightBits = 40
	// MaxVocab bounds the row length so that integer weight sums cannot
	// overflow: MaxVocab * 2^40 < 2^64.
	MaxVocab = 1<<(64-weightBits) - 1
)

// quantise turns a weight e = p_i/p_max in [0, 1] into an integer, rounding
// to nearest. Integer sums are exact and do not depend on the order of
// addition, which lets the sampler find the top-p cut from bucket totals and
// still agree bit for bit with a sort-based definition.
func quantise(e float64) uint64 {
	return uint64(int64(e*(1<<weightBits) + 0.5)) // e * 2^40 is exact: nothing to fuse
}
