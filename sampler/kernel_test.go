package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// simdNames names the kernel levels, from noSIMD (the Go code) up.
var simdNames = []string{"go", "avx2", "avx512"}

// withSIMD runs f with the kernels of the given level (noSIMD: Go only).
func withSIMD(level int, f func()) {
	saved := simd
	simd = level
	defer func() { simd = saved }()
	f()
}

// kernelRows are rows of awkward lengths (not multiples of the 8, 16 and 32
// lanes the kernels use) and contents: extreme and tied logits, -Inf, NaN
// and +Inf in the vector body and in the tail.
func kernelRows() []namedRow {
	r := rand.New(rand.NewPCG(91, 92))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	lengths := []int{1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 2047, 2048, 2049, 4103, qwenVocab, qwenVocab + 5}
	for range 30 {
		lengths = append(lengths, 1+r.IntN(5000))
	}
	var rows []namedRow
	for _, v := range lengths {
		rows = append(rows,
			namedRow{fmt.Sprintf("lm-like v%d", v), lmLikeRow(r, v)},
			namedRow{fmt.Sprintf("gaussian sd30 v%d", v), gaussianRow(r, v, 30)},
			namedRow{fmt.Sprintf("ties v%d", v), tiedRow(r, v, 4)},
			namedRow{fmt.Sprintf("masked v%d", v), maskedRow(r, v, 0.6)},
			namedRow{fmt.Sprintf("extremes v%d", v), func() []float32 {
				row := make([]float32, v)
				for i := range row {
					row[i] = []float32{math.MaxFloat32, -math.MaxFloat32, 0, -inf, 1e-30, -1e30}[r.IntN(6)]
				}
				return row
			}()},
			namedRow{fmt.Sprintf("all -Inf v%d", v), func() []float32 {
				row := make([]float32, v)
				for i := range row {
					row[i] = -inf
				}
				return row
			}()},
			namedRow{fmt.Sprintf("finite only in the last two v%d", v), func() []float32 {
				row := make([]float32, v)
				for i := range row {
					row[i] = -inf
				}
				row[v-1] = -3
				row[max(0, v-2)] = -3
				return row
			}()},
		)
		for _, bad := range []float32{nan, inf} {
			for _, at := range []int{0, v / 2, v - 1} {
				row := lmLikeRow(r, v)
				row[at] = bad
				if at > 0 {
					row[r.IntN(at+1)] = -inf
				}
				rows = append(rows, namedRow{fmt.Sprintf("%v at %d of %d", bad, at, v), row})
			}
		}
	}
	return rows
}

// prepared is everything prepare leaves behind that a draw depends on.
type prepared struct {
	argmax        int
	logZ, entropy float64
	errText       string
	scale         float64
	bk            []uint16
	cnt           [regularBuckets]uint32 // the spare slots are not compared
	mass          [regularBuckets]uint64
}

func prepareWith(level int, row []float32, temp float64) (p prepared) {
	withSIMD(level, func() {
		s := new(scratch)
		s.logits = row
		var err error
		p.argmax, p.logZ, p.entropy, err = s.prepare(temp)
		if err != nil {
			p.errText = err.Error()
			return
		}
		p.scale, p.bk = s.scale, s.bk
		p.cnt, p.mass = [regularBuckets]uint32(s.cnt[:regularBuckets]), [regularBuckets]uint64(s.mass[:regularBuckets])
	})
	return p
}

// TestKernelsMatchGo: each kernel level this CPU has and the portable Go
// path give bit-identical maxima, sums, buckets, weights, errors and draws.
func TestKernelsMatchGo(t *testing.T) {
	skipWithoutKernels(t)
	for level := bestSIMD; level > noSIMD; level-- {
		t.Run(simdNames[level], func(t *testing.T) { kernelsMatchGo(t, level) })
	}
}

func kernelsMatchGo(t *testing.T, level int) {
	params := []Params{
		{Temperature: 0.6, TopP: 0.95},
		{Temperature: 1, TopK: 40, TopP: 0.9, MinP: 0.05},
		{Temperature: 1e-3, TopP: 1},
		{Temperature: 30, TopP: 0.5},
		{Temperature: 0, TopP: 1},
	}
	for _, nr := range kernelRows() {
		for _, temp := range []float64{0, 1e-3, 0.6, 1, 30} {
			a, g := prepareWith(level, nr.row, temp), prepareWith(noSIMD, nr.row, temp)
			name := fmt.Sprintf("%s T=%g", nr.name, temp)
			if a.errText != g.errText {
				t.Fatalf("%s: error %q with kernels, %q without", name, a.errText, g.errText)
			}
			if a.argmax != g.argmax || math.Float64bits(a.logZ) != math.Float64bits(g.logZ) ||
				math.Float64bits(a.entropy) != math.Float64bits(g.entropy) || a.scale != g.scale {
				t.Fatalf("%s: argmax %d log Z %x entropy %x scale %v with kernels; %d %x %x %v without", name,
					a.argmax, math.Float64bits(a.logZ), math.Float64bits(a.entropy), a.scale,
					g.argmax, math.Float64bits(g.logZ), math.Float64bits(g.entropy), g.scale)
			}
			if !slices.Equal(a.bk, g.bk) || a.cnt != g.cnt || a.mass != g.mass {
				t.Fatalf("%s: buckets or histogram differ", name)
			}
		}
		if prepareWith(noSIMD, nr.row, 1).errText != "" {
			continue
		}
		for i, p := range params {
			var d [2]Draw
			for k, l := range []int{level, noSIMD} {
				withSIMD(l, func() {
					rng := NewStream(17, uint64(i))
					var err error
					if d[k], err = Sample(nr.row, p, &rng); err != nil {
						t.Fatalf("%s %+v: %v", nr.name, p, err)
					}
				})
			}
			if d[0] != d[1] {
				t.Fatalf("%s %+v: %+v with kernels, %+v without", nr.name, p, d[0], d[1])
			}
		}
	}
}

// TestMatchBucketKernel: the bucket search finds the same ids with each
// kernel level and without, including when out is too short for them all.
func TestMatchBucketKernel(t *testing.T) {
	skipWithoutKernels(t)
	r := rand.New(rand.NewPCG(93, 94))
	for _, v := range []int{1, 31, 32, 33, 1000, qwenVocab} {
		bk := make([]uint16, v)
		for i := range bk {
			bk[i] = uint16(r.IntN(5))
		}
		for b := range uint16(6) {
			for _, room := range []int{0, 1, 3, v} {
				var want []int32
				for level := noSIMD; level <= bestSIMD; level++ {
					withSIMD(level, func() {
						out := make([]int32, room)
						got := out[:matchBucket(bk, b, out)]
						if level == noSIMD {
							want = got
						} else if !slices.Equal(got, want) {
							t.Fatalf("v=%d b=%d room=%d: %v with %s, %v without", v, b, room, got, simdNames[level], want)
						}
					})
				}
			}
		}
	}
}

// skipWithoutKernels skips where only the Go path exists (another architecture, -tags
// purego, a CPU without AVX2); in CI a build with kernels on a CPU that cannot run them
// would leave the assembly untested, so there it fails.
func skipWithoutKernels(t *testing.T) {
	if bestSIMD != noSIMD {
		return
	}
	if os.Getenv("CI") == "true" && kernelsBuilt {
		t.Fatal("CI on amd64: this CPU has no AVX2, so the sampler's kernels go untested")
	}
	t.Skip("this CPU or build has no kernels: only the Go path runs")
}
