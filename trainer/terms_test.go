package trainer

import (
	"math"
	"sort"
	"testing"
)

// The tests of this file state what UMAD's two terms are for, in debate terms, so that a
// term with the wrong sign or direction fails here (issue 42): the influence reward credits
// the agent whose turn-0 answer moved a peer to the right answer and debits the one that
// moved a peer away from it; the NLL weight favours confident samples as exp(-alpha z).

func TestInfluenceCreditsWhoTurnedAPeer(t *testing.T) {
	// correct[turn][agent][trajectory]. Agent 0 is right at turn 0 in both trajectories and
	// agent 1 starts alike in both, so the team rewards at turn 0 tie and only what agent 0's
	// answer did to agent 1 at turn 1 tells the trajectories apart.
	for _, tc := range []struct {
		why     string
		correct [][][]float64
		better  int // the trajectory whose turn-0 answer must be reinforced over the other
	}{
		{"agent 1 turned from wrong to right in trajectory 0, stayed wrong in 1", [][][]float64{
			{{1, 1}, {0, 0}},
			{{1, 1}, {1, 0}},
		}, 0},
		{"agent 1 turned from right to wrong in trajectory 0, stayed right in 1", [][][]float64{
			{{1, 1}, {1, 1}},
			{{1, 1}, {0, 1}},
		}, 1},
	} {
		none := []float64{0, 0}
		for _, algo := range []string{"umad", "intrinsic-only"} {
			a, err := LookupAlgo(algo)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []InfluenceMode{InfluenceSign, InfluencePeerMean} {
				a.Influence = mode
				g, err := a.GroupAdvantage(tc.correct, 0, 0, none, none)
				if err != nil {
					t.Fatal(err)
				}
				worse := 1 - tc.better
				credit := tc.better == 0 // the first case credits trajectory 0, the second debits it
				if credit && !(g.Influence[0] > 0 && g.Influence[1] == 0) || !credit && !(g.Influence[0] < 0 && g.Influence[1] == 0) {
					t.Errorf("%s, %s (%s): influence %v; want a credit for turning the peer right, a debit for turning it wrong",
						tc.why, algo, mode, g.Influence)
				}
				if !(g.Advantages[tc.better] > 0 && g.Advantages[worse] < 0) {
					t.Errorf("%s, %s (%s): advantages %v; want trajectory %d's turn-0 answer reinforced over %d's",
						tc.why, algo, mode, g.Advantages, tc.better, worse)
				}
			}
		}
		// Without the influence reward, agent 0's turn-0 rewards tie: nothing to learn.
		ippo, _ := LookupAlgo("ippo")
		if g, _ := ippo.GroupAdvantage(tc.correct, 0, 0, none, none); g.Advantages[0] != 0 || g.Advantages[1] != 0 {
			t.Errorf("%s, ippo: advantages %v, want 0", tc.why, g.Advantages)
		}
		// The influence reward looks forward: the last turn gets none.
		umad, _ := LookupAlgo("umad")
		if g, _ := umad.GroupAdvantage(tc.correct, 1, 0, none, none); g.Influence[0] != 0 || g.Influence[1] != 0 {
			t.Errorf("%s: influence at the last turn %v, want none", tc.why, g.Influence)
		}
	}
}

func TestNLLWeightRanksAsThePaper(t *testing.T) {
	// The paper's weight (Algorithm 2, reference section 3.5): exp(-alpha z) with z the
	// group-standardised mean-token NLL, so the most confident sample weighs most, for a
	// positive advantage and a negative one alike.
	nll := []float64{0.9, 0.1, 2.5, 0.4, 1.3}
	alpha := 0.25
	w := NLLWeights(nll, alpha)
	var mean, ss float64
	for _, v := range nll {
		mean += v / float64(len(nll))
	}
	for _, v := range nll {
		ss += (v - mean) * (v - mean)
	}
	std := math.Sqrt(ss / float64(len(nll)))
	byNLL := []int{0, 1, 2, 3, 4}
	sort.Slice(byNLL, func(i, j int) bool { return nll[byNLL[i]] < nll[byNLL[j]] })
	for r, k := range byNLL {
		if want := math.Exp(-alpha * (nll[k] - mean) / std); !near(w[k], want, 1e-6) {
			t.Errorf("weight of NLL %g = %g, want exp(-alpha z) = %g", nll[k], w[k], want)
		}
		if r > 0 && !(w[k] < w[byNLL[r-1]]) {
			t.Errorf("NLL %g weighs %g, not less than NLL %g's %g: the less confident sample must weigh less",
				nll[k], w[k], nll[byNLL[r-1]], w[byNLL[r-1]])
		}
	}

	// In a group: two right and two wrong samples; the confident one of each pair moves
	// further (a larger positive, a larger negative advantage).
	correct := [][][]float64{{{1, 1, 0, 0}, {0, 0, 0, 0}}}
	umad, _ := LookupAlgo("umad")
	g, err := umad.GroupAdvantage(correct, 0, 0, []float64{0, 0, 0, 0}, []float64{0.2, 1.0, 0.2, 1.0})
	if err != nil {
		t.Fatal(err)
	}
	if !(g.Advantages[0] > g.Advantages[1] && g.Advantages[1] > 0) || !(g.Advantages[2] < g.Advantages[3] && g.Advantages[3] < 0) {
		t.Errorf("advantages %v: the confident right sample must gain most and the confident wrong one lose most", g.Advantages)
	}
}
