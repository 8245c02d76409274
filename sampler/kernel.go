package sampler

import (
	"fmt"
	"math"
)

// The passes over a logits row. Each has a portable Go body, the reference,
// and first hands the longest prefix of whole vectors to an AVX-512 or AVX2
// kernel where the CPU has one (kernel_amd64.s; simd picks it). The kernels do
// the same float64 operations in the same order per lane, so every path gives
// bit-identical results (TestKernelsMatchGo): a machine with or without
// AVX-512 draws the same tokens with the same log-probs.

// lanes is the number of partial sums of Z and sum y e^y: token j of a row
// adds into lane j%lanes, whichever path computes it.
const lanes = 8

// weighBlock is how many tokens the weighing pass takes at a time: the
// AVX-512 kernel stages the regular ones for the histogram (weigh adds them),
// and the staging buffers stay in L1.
const weighBlock = 2048

// rowMax returns the maximum logit and the lowest id holding it, rejecting
// NaN, +Inf and rows that are all -Inf.
func rowMax(logits []float32) (m float32, argmax int, err error) {
	m = float32(math.Inf(-1))
	start := 0
	if n, mm, am, ok := rowMaxAsm(logits); ok {
		start, m, argmax = n, mm, am
	} // else also a NaN or +Inf: the loop below finds and names the first
	for i := start; i < len(logits); i++ {
		if x := logits[i]; !(x <= m) { // a new maximum, or NaN
			if x != x {
				return 0, 0, fmt.Errorf("%w: logit %d is NaN", ErrLogits, i)
			}
			if math.IsInf(float64(x), 1) {
				return 0, 0, fmt.Errorf("%w: logit %d is +Inf", ErrLogits, i)
			}
			m, argmax = x, i
		}
	}
	if math.IsInf(float64(m), -1) {
		return 0, 0, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, len(logits))
	}
	return m, argmax, nil
}

// minAtLeast returns the lowest logit that is >= thr, or +Inf if none is.
func minAtLeast(logits []float32, thr float32) float32 {
	start, lo := minAtLeastAsm(logits, thr)
	for _, x := range logits[start:] {
		if x >= thr && x < lo {
			lo = x
		}
	}
	return lo
}

// weighFrame carries one row's weighing pass: its constants, the lane sums
// and the histogram. The assembly reads it by the offsets in go_asm.h.
type weighFrame struct {
	max, invT, scale float64
	z, sx            [lanes]float64
	cnt              *[histSlots]uint32
	mass             *[histSlots]uint64
}

// histSlots: the regular buckets, then a spare slot per lane. The AVX2
// kernel adds a token of the overflow bucket into its lane's spare slot,
// which nothing reads, so it updates the histogram without a branch.
const histSlots = regularBuckets + lanes

// expConsts are the constants of expNeg, bucketOf and quantise, for the
// assembly kernels; the Go code uses the named constants directly.
type expConstants struct {
	stepsPerNat, roundMagic, natsPerStep, c120, c24, sixth, half, one, floor, unit float64
	two52                                                                          float64 // AVX2's float-to-integer trick
	stepMask, unbias                                                               uint64
	overflow                                                                       uint32
}

var expConsts = expConstants{stepsPerNat, roundMagic, natsPerStep, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, expFloor,
	1 << weightBits, 0x1p52, expSteps - 1, expUnbias, overflowBucket}

// weighTokens weighs a block of logits (len(xs) <= weighBlock; the first
// token of xs is a multiple of lanes into the row): it adds e = e^y and y e
// into f's lane sums, writes every token's bucket into bk, and counts the
// tokens of regular buckets in f's histogram, except those it staged, in
// order, in stB and stQ (which have room for len(xs)+lanes entries). It
// returns how many it staged.
func weighTokens(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (staged int) {
	j, staged := weighAsm(f, xs, bk, stB, stQ)
	m, invT, scale, cnt, mass := f.max, f.invT, f.scale, f.cnt, f.mass
	for ; j < len(xs); j++ {
		y := clampTail(scaled(xs[j], m, invT))
		e := expNeg(y)
		f.z[j%lanes] += e
		f.sx[j%lanes] = math.FMA(y, e, f.sx[j%lanes])
		b := bucketOf(y, scale)
		bk[j] = uint16(b)
		if b < overflowBucket {
			cnt[b]++
			mass[b] += quantise(e)
		}
	}
	return staged
}

// matchBucket writes into out the ids of the first len(out) tokens whose
// bucket in bk is b, and returns how many it wrote.
func matchBucket(bk []uint16, b uint16, out []int32) int {
	i, n := matchBucketAsm(bk, b, out)
	for ; i < len(bk) && n < len(out); i++ {
		if bk[i] == b {
			out[n] = int32(i)
			n++
		}
	}
	return n
}
