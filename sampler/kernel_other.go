//go:build !amd64 || purego

package sampler

import "math"

// There are no kernels for this build: the functions below hand every token
// to the Go code. simd exists, always noSIMD, for the tests that set it.
const (
	noSIMD   = iota
	bestSIMD = noSIMD
)

var simd = noSIMD

// kernelsBuilt says whether this build has the assembly kernels (amd64 without purego).
const kernelsBuilt = false

func rowMaxAsm([]float32) (n int, m float32, argmax int, ok bool) { return 0, 0, 0, false }

func minAtLeastAsm([]float32, float32) (n int, lo float32) { return 0, float32(math.Inf(1)) }

func weighAsm(*weighFrame, []float32, []uint16, []int32, []uint64) (n, staged int) { return 0, 0 }

func matchBucketAsm([]uint16, uint16, []int32) (i, n int) { return 0, 0 }
