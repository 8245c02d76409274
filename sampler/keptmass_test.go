package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKeptMass: Draw.KeptMass is the float64 probability of the reference
// kept set within the documented V*2^-40 (plus float32 rounding), exactly 1
// when no filter cuts anything, and 1 for greedy.
func TestKeptMass(t *testing.T) {
	rows := truncationRows()
	if !testing.Short() {
		r := rand.New(rand.NewPCG(101, 102))
		rows = append(rows,
			namedRow{"lm-like full vocab", lmLikeRow(r, qwenVocab)},
			namedRow{"gaussian full vocab", gaussianRow(r, qwenVocab, 1)})
	}
	params := []Params{
		{Temperature: 1, TopP: 1},
		{Temperature: 0.6, TopP: 0.95},
		{Temperature: 1, TopK: 1, TopP: 1},
		{Temperature: 1, TopK: 40, TopP: 0.9, MinP: 0.05},
		{Temperature: 0.3, TopP: 1, MinP: 0.2},
		{Temperature: 100, TopP: 0.5},
	}
	cut := 0
	for _, nr := range rows {
		order := sampleOrder(nr.row)
		for i, p := range params {
			name := fmt.Sprintf("%s %+v", nr.name, p)
			rng := NewStream(33, uint64(i))
			d, err := Sample(nr.row, p, &rng)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if p.TopK == 0 && p.TopP == 1 && p.MinP == 0 {
				if d.KeptMass != 1 {
					t.Fatalf("%s: no filter, KeptMass %v, want exactly 1", name, d.KeptMass)
				}
				continue
			}
			lp := refLogSoftmax(nr.row, p.Temperature)
			ref := newRefTruncation(nr.row, order, p)
			want := 0.0
			for _, id := range ref.order[:ref.kept] {
				want += math.Exp(lp[id])
			}
			if diff := math.Abs(float64(d.KeptMass) - want); diff > float64(len(nr.row))*0x1p-40+6e-8 {
				t.Fatalf("%s: KeptMass %v, reference %v (|diff| %.3g)", name, d.KeptMass, want, diff)
			}
			if want < 1-1e-6 {
				cut++
			}
		}
		rng := NewStream(34)
		if d, err := Sample(nr.row, Params{Temperature: 0, TopK: 1, TopP: 0.5}, &rng); err != nil || d.KeptMass != 1 {
			t.Fatalf("%s greedy: KeptMass %v (err %v), want 1", nr.name, d.KeptMass, err)
		}
	}
	if cut < len(rows) {
		t.Fatalf("only %d of the cases cut a measurable mass: the filters are not exercised", cut)
	}
}
