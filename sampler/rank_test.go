package sampler

import (
	"cmp"
	"math"
	"math/rand/v2"
	"testing"
)

// byRank is the sampling order by definition: higher logit first, lower id
// on ties. The tests' reference sorts use it; the sampler sorts rankKeys.
func byRank(a, b cand) int {
	if a.x != b.x {
		if a.x > b.x {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.id, b.id)
}

// TestRankKeyOrder: rankKey orders tokens exactly as byRank, for signed
// zeros, subnormals, extremes, -Inf and ties.
func TestRankKeyOrder(t *testing.T) {
	inf := float32(math.Inf(1))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1, -1, math.MaxFloat32, -math.MaxFloat32, -inf, 3.5, -3.5}
	r := rand.New(rand.NewPCG(111, 112))
	var toks []cand
	for range 2000 {
		x := special[r.IntN(len(special))]
		if r.IntN(2) == 0 {
			x = float32(r.NormFloat64() * 10)
		}
		toks = append(toks, cand{x: x, id: r.Int32N(50)})
	}
	for _, a := range toks {
		for _, b := range toks[:200] {
			want := byRank(a, b)
			got := cmp.Compare(rankKey(a.x, a.id), rankKey(b.x, b.id))
			if got != want {
				t.Fatalf("(%v, %d) vs (%v, %d): rankKey order %d, byRank %d", a.x, a.id, b.x, b.id, got, want)
			}
		}
	}
}
