//go:build amd64 && !purego

package sampler

import (
	"math"

	"golang.org/x/sys/cpu"
)

// The instruction sets with kernels, in increasing order.
const (
	noSIMD = iota
	avx2   // AVX2, FMA and BMI1
	avx512 // AVX-512 F, DQ, BW and VL, BMI1 and POPCNT
)

// bestSIMD is the best set this CPU and OS support (x/sys/cpu checks that the
// OS saves the YMM and ZMM registers).
var bestSIMD = func() int {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512DQ && x.HasAVX512BW && x.HasAVX512VL && x.HasBMI1 && x.HasPOPCNT:
		return avx512
	case x.HasAVX2 && x.HasFMA && x.HasBMI1:
		return avx2
	}
	return noSIMD
}()

// simd selects the kernels; tests lower it to compare the paths.
var simd = bestSIMD

// kernelsBuilt says whether this build has the assembly kernels (amd64 without purego).
const kernelsBuilt = true

// rowMaxAsm scans the longest prefix of whole 64-float blocks: m is its
// maximum and argmax the lowest id holding it. ok is false, and the Go code
// scans the whole row, if the prefix is empty or holds a NaN or +Inf.
func rowMaxAsm(logits []float32) (n int, m float32, argmax int, ok bool) {
	n = len(logits) &^ 63
	if n == 0 || simd == noSIMD {
		return 0, 0, 0, false
	}
	xs := logits[:n]
	if simd == avx512 {
		m, ok = maxAVX512(xs)
	} else {
		m, ok = maxAVX2(xs)
	}
	if !ok || math.IsInf(float64(m), 1) {
		return 0, 0, 0, false
	}
	// A second, early-exiting pass finds the argmax: tracking it in the
	// first would chain every vector's compare and blend.
	if simd == avx512 {
		argmax = indexAVX512(xs, m)
	} else {
		argmax = indexAVX2(xs, m)
	}
	return n, m, argmax, true
}

func minAtLeastAsm(logits []float32, thr float32) (n int, lo float32) {
	n = len(logits) &^ 15
	switch {
	case n == 0 || simd == noSIMD:
		return 0, float32(math.Inf(1))
	case simd == avx512:
		return n, minAtLeastAVX512(logits[:n], thr)
	}
	return n, minAtLeastAVX2(logits[:n], thr)
}

func weighAsm(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (n, staged int) {
	n = len(xs) &^ (lanes - 1)
	if n == 0 || simd == noSIMD {
		return 0, 0
	}
	if len(bk) < n || len(stB) < n+lanes || len(stQ) < n+lanes {
		panic("sampler: weighAsm buffers too short") // the kernels store whole vectors
	}
	if simd == avx512 {
		return n, weighAVX512(f, xs[:n], bk, stB, stQ)
	}
	weighAVX2(f, xs[:n], bk)
	return n, 0
}

func matchBucketAsm(bk []uint16, b uint16, out []int32) (i, n int) {
	switch simd {
	case avx512:
		return matchAVX512(bk[:len(bk)&^31], b, out)
	case avx2:
		return matchAVX2(bk[:len(bk)&^31], b, out)
	}
	return 0, 0
}

// maxAVX512 returns the maximum of xs, and ok = false if any is NaN.
// len(xs) is a positive multiple of 64.
//
//go:noescape
func maxAVX512(xs []float32) (m float32, ok bool)

// maxAVX2 is maxAVX512 with 8-float vectors.
//
//go:noescape
func maxAVX2(xs []float32) (m float32, ok bool)

// indexAVX512 returns the first i with xs[i] == v, or len(xs); len(xs) is a
// multiple of 16.
//
//go:noescape
func indexAVX512(xs []float32, v float32) int

// indexAVX2 is indexAVX512 for len(xs) a multiple of 8.
//
//go:noescape
func indexAVX2(xs []float32, v float32) int

// minAtLeastAVX512 is minAtLeast for len(xs) a positive multiple of 16.
//
//go:noescape
func minAtLeastAVX512(xs []float32, thr float32) float32

// minAtLeastAVX2 is minAtLeastAVX512 with two 8-float vectors.
//
//go:noescape
func minAtLeastAVX2(xs []float32, thr float32) float32

// weighAVX512 is weighTokens for len(xs) a positive multiple of 8; stB and
// stQ have room for len(xs)+8 entries. It stages every regular token:
// compressing them into the staging buffers costs less than updating the
// histogram for every token, when most are in the overflow bucket.
//
//go:noescape
func weighAVX512(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (staged int)

// weighAVX2 is weighTokens for len(xs) a positive multiple of 8, with two
// 4-double vectors per 8 tokens. It stages nothing: without a compress
// instruction, adding every token into the histogram (the overflow ones into
// spare slots) costs less than staging them one by one.
//
//go:noescape
func weighAVX2(f *weighFrame, xs []float32, bk []uint16)

// matchAVX512 is matchBucket for len(bk) a multiple of 32; i is how far it
// read.
//
//go:noescape
func matchAVX512(bk []uint16, b uint16, out []int32) (i, n int)

// matchAVX2 is matchAVX512 with two 16-word vectors.
//
//go:noescape
func matchAVX2(bk []uint16, b uint16, out []int32) (i, n int)
