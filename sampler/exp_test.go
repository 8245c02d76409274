package sampler

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpNegAccuracy bounds the relative error of the fast exp against
// math.Exp over its whole domain: a dense grid (which crosses every table
// step and octave) plus random points.
func TestExpNegAccuracy(t *testing.T) {
	const bound = 1e-12
	worst, worstY := 0.0, 0.0
	check := func(y float64) {
		want := math.Exp(y)
		if rel := math.Abs(expNeg(y)-want) / want; rel > worst {
			worst, worstY = rel, y
		}
	}
	for y := 0.0; y >= expFloor; y -= 1.0 / 4096 {
		check(y)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 200000 {
		check(-r.Float64() * -expFloor)
		check(-r.Float64() * 1e-3) // near 0, where most of the probability mass sits
	}
	if worst > bound {
		t.Fatalf("expNeg relative error %.3g at y=%v, want <= %g", worst, worstY, bound)
	}
	t.Logf("max relative error %.3g at y=%v", worst, worstY)
}

// TestWeightOfTopToken: the most probable token must weigh exactly 2^40,
// which the doc and the overflow analysis rely on, and the quantisation must
// send the far tail to zero.
func TestWeightOfTopToken(t *testing.T) {
	if got := expNeg(0); got != 1 {
		t.Fatalf("expNeg(0) = %v, want exactly 1", got)
	}
	cases := []struct {
		e    float64
		want uint64
		why  string
	}{
		{1, 1 << weightBits, "the top token"},
		{0.5, 1 << (weightBits - 1), "a power of two is exact"},
		{0x1p-42, 0, "below half a unit rounds to zero"},
		{0x1p-41 * 1.5, 1, "above half a unit rounds to one"},
		{0, 0, "a masked token"},
	}
	for _, c := range cases {
		if got := quantise(c.e); got != c.want {
			t.Errorf("quantise(%v) = %d, want %d (%s)", c.e, got, c.want, c.why)
		}
	}
	// At the coarsest scale the overflow bucket starts at y = -32; everything
	// there must weigh 0.
	if q := quantise(expNeg(-float64(regularBuckets) / minScale)); q != 0 {
		t.Errorf("weight at the overflow boundary = %d, want 0", q)
	}
}
