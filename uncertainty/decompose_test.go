package uncertainty

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

func TestDecompose(t *testing.T) {
	ln2, ln3 := math.Log(2), math.Log(3)
	// h34 is H(3/4, 1/4), written out by hand.
	h34 := -(0.75*math.Log(0.75) + 0.25*math.Log(0.25))
	tests := []struct {
		name   string
		counts [][]int
		want   Decomposition
	}{
		{"identical agents disagree with nobody: EU = 0",
			[][]int{{2, 2}, {2, 2}}, Decomposition{TU: ln2, EU: 0, AU: ln2}},
		{"identical certain agents: no uncertainty at all",
			[][]int{{5}, {5}, {5}}, Decomposition{}},
		{"two disjoint confident agents: EU = log 2, AU = 0",
			[][]int{{5, 0}, {0, 5}}, Decomposition{TU: ln2, EU: ln2, AU: 0}},
		{"three disjoint confident agents: EU = log 3, AU = 0",
			[][]int{{4, 0, 0}, {0, 4, 0}, {0, 0, 4}}, Decomposition{TU: ln3, EU: ln3, AU: 0}},
		// p0 = (3/4, 1/4, 0), p1 = (0, 1/2, 1/2), p_sys = (3/8, 3/8, 1/4):
		// TU = (3/4) log(8/3) + (1/4) log 4, AU = (H(3/4,1/4) + log 2) / 2.
		{"mixed agents computed by hand",
			[][]int{{3, 1, 0}, {0, 2, 2}}, Decomposition{
				TU: 0.75*math.Log(8.0/3) + 0.25*math.Log(4),
				EU: 0.75*math.Log(8.0/3) + 0.25*math.Log(4) - (h34+ln2)/2,
				AU: (h34 + ln2) / 2}},
		// p0 = (1/2, 1/2), p1 = (1, 0), p_sys = (3/4, 1/4).
		{"agents may have different sample counts",
			[][]int{{1, 1}, {4, 0}}, Decomposition{TU: h34, EU: h34 - ln2/2, AU: ln2 / 2}},
		{"a single agent is a team of one: EU = 0",
			[][]int{{1, 1, 2}}, Decomposition{TU: 1.5 * ln2, EU: 0, AU: 1.5 * ln2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decompose(tc.counts)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got.TU, tc.want.TU) || !near(got.EU, tc.want.EU) || !near(got.AU, tc.want.AU) {
				t.Errorf("Decompose(%v) = %+v, want %+v", tc.counts, got, tc.want)
			}
			if got.EU < 0 {
				t.Errorf("EU = %g < 0", got.EU)
			}
		})
	}
}

func TestDecomposeRejectsBadCounts(t *testing.T) {
	tests := []struct {
		name   string
		counts [][]int
	}{
		{"no agents", nil},
		{"supports of different sizes", [][]int{{1, 2}, {3}}},
		{"a negative count", [][]int{{1, -1}, {1, 1}}},
		{"an agent without samples", [][]int{{1, 1}, {0, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decompose(tc.counts); err == nil {
				t.Errorf("Decompose(%v): want an error", tc.counts)
			}
		})
	}
}

// TestDecomposeIdentity checks the identity and the bounds on random count tables:
// TU = EU + AU, 0 <= EU <= log N, AU <= TU <= log |support|.
func TestDecomposeIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		agents, support := 1+rng.IntN(5), 1+rng.IntN(12)
		counts := make([][]int, agents)
		for i := range counts {
			counts[i] = make([]int, support)
			counts[i][rng.IntN(support)]++ // every agent has a sample
			for y := range counts[i] {
				if rng.IntN(3) == 0 {
					counts[i][y] += rng.IntN(20)
				}
			}
		}
		d, err := Decompose(counts)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(d.TU-(d.EU+d.AU)) > 1e-9 {
			t.Fatalf("trial %d %v: TU %g != EU %g + AU %g", trial, counts, d.TU, d.EU, d.AU)
		}
		if d.EU < 0 || d.EU > math.Log(float64(agents))+1e-12 {
			t.Fatalf("trial %d %v: EU %g outside [0, log %d]", trial, counts, d.EU, agents)
		}
		if d.AU > d.TU+1e-12 || d.TU > math.Log(float64(support))+1e-12 {
			t.Fatalf("trial %d %v: AU %g, TU %g, log support %g", trial, counts, d.AU, d.TU, math.Log(float64(support)))
		}
	}
}
