//go:build amd64 && !purego

package sampler

import (
	"math"

	"golang.org/x/sys/cpu"
)

// useAsm selects the AVX-512 kernels (F, DQ, BW and VL; x/sys/cpu also checks
// that the OS saves the ZMM registers). Tests clear it to run the Go path.
var useAsm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// rowMaxAsm scans the longest prefix of whole 16-float vectors: m is its
// maximum and argmax the lowest id holding it. ok is false, and the Go code
// scans the whole row, if the prefix is empty or holds a NaN or +Inf.
func rowMaxAsm(logits []float32) (n int, m float32, argmax int, ok bool) {
	var vals [16]float32
	var ids [16]int32
	n = len(logits) &^ 15
	if n == 0 || !maxAVX512(logits[:n], &vals, &ids) {
		return 0, 0, 0, false
	}
	// Each lane kept the first id of its own maximum.
	m, argmax = vals[0], int(ids[0])
	for l := 1; l < len(vals); l++ {
		if vals[l] > m || vals[l] == m && int(ids[l]) < argmax {
			m, argmax = vals[l], int(ids[l])
		}
	}
	return n, m, argmax, true
}

func minAtLeastAsm(logits []float32, thr float32) (n int, lo float32) {
	n = len(logits) &^ 15
	if n == 0 {
		return 0, float32(math.Inf(1))
	}
	return n, minAtLeastAVX512(logits[:n], thr)
}

func weighAsm(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (n, staged int) {
	n = len(xs) &^ (lanes - 1)
	if n == 0 {
		return 0, 0
	}
	if len(bk) < n || len(stB) < n+lanes || len(stQ) < n+lanes {
		panic("sampler: weighAsm buffers too short") // the kernel stores whole vectors
	}
	return n, weighAVX512(f, xs[:n], bk, stB, stQ)
}

func matchBucketAsm(bk []uint16, b uint16, out []int32) (i, n int) {
	return matchAVX512(bk[:len(bk)&^31], b, out)
}

// maxAVX512 keeps per lane the maximum and the first id holding it, and
// reports false if any value is NaN or +Inf. len(xs) is a positive multiple
// of 16.
//
//go:noescape
func maxAVX512(xs []float32, vals *[16]float32, ids *[16]int32) (ok bool)

// minAtLeastAVX512 is minAtLeast for len(xs) a positive multiple of 16.
//
//go:noescape
func minAtLeastAVX512(xs []float32, thr float32) float32

// weighAVX512 is weighTokens for len(xs) a positive multiple of 8; stB and
// stQ have room for len(xs)+8 entries.
//
//go:noescape
func weighAVX512(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (staged int)

// matchAVX512 is matchBucket for len(bk) a multiple of 32; i is how far it
// read.
//
//go:noescape
func matchAVX512(bk []uint16, b uint16, out []int32) (i, n int)
