package trainer

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func checkSlice(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if !near(got[i], want[i], 1e-12) {
			t.Errorf("%s[%d] = %.15g, want %.15g", what, i, got[i], want[i])
		}
	}
}

func TestTeamRewards(t *testing.T) {
	for _, tc := range []struct {
		why     string
		correct []float64
		mode    TeamMode
		want    []float64
	}{
		{"sum: both agents get the count of correct agents", []float64{1, 0}, TeamSum, []float64{1, 1}},
		{"sum of three", []float64{1, 1, 0}, TeamSum, []float64{2, 2, 2}},
		{"max: one right agent makes the team right", []float64{0, 1}, TeamMax, []float64{1, 1}},
		{"max of all wrong is 0", []float64{0, 0}, TeamMax, []float64{0, 0}},
		{"dictator follows agent 0 even when agent 1 is right", []float64{0, 1}, TeamDictator, []float64{0, 0}},
		{"individual keeps each agent's own correctness", []float64{0, 1}, TeamIndividual, []float64{0, 1}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			got, err := TeamRewards(tc.correct, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			checkSlice(t, "team", got, tc.want)
		})
	}
	if _, err := TeamRewards([]float64{1}, "avg"); err == nil {
		t.Error("an unknown mode must be an error")
	}
	if _, err := ParseTeamMode("avg"); err == nil {
		t.Error("ParseTeamMode must refuse an unknown mode")
	}
}

func TestInfluence(t *testing.T) {
	for _, tc := range []struct {
		why               string
		mode              InfluenceMode
		eta               float64
		i                 int
		team, teamNext    []float64
		correct, corrNext []float64
		want              float64
	}{
		{"sign: team rose from 1 to 2, the peer's team reward is the team", InfluenceSign, 0.2, 0,
			[]float64{1, 1}, []float64{2, 2}, []float64{1, 0}, []float64{1, 1}, 0.2},
		{"sign: team fell", InfluenceSign, 0.2, 1,
			[]float64{2, 2}, []float64{1, 1}, []float64{1, 1}, []float64{1, 0}, -0.2},
		{"sign: no change gives nothing", InfluenceSign, 0.2, 0,
			[]float64{1, 1}, []float64{1, 1}, []float64{1, 0}, []float64{0, 1}, 0},
		{"sign: magnitude is ignored, only the direction counts", InfluenceSign, 0.2, 0,
			[]float64{0, 0, 0}, []float64{0, 1, 1}, []float64{0, 0, 0}, []float64{0, 1, 1}, 0.2},
		{"sign: individual rewards, peers' changes cancel", InfluenceSign, 0.2, 2,
			[]float64{1, 0, 0}, []float64{0, 1, 0}, []float64{1, 0, 0}, []float64{0, 1, 0}, 0},
		{"peer-mean: eta/(N-1) times the peers' own gains, not the team's", InfluencePeerMean, 0.25, 1,
			[]float64{1, 1, 1}, []float64{1, 1, 1}, []float64{0, 0, 1}, []float64{0, 1, 0}, 0.25 * (0 - 1) / 2},
		{"peer-mean: own improvement does not count", InfluencePeerMean, 0.25, 0,
			[]float64{0, 0}, []float64{1, 1}, []float64{0, 0}, []float64{1, 0}, 0},
		{"last turn: no next turn, no reward", InfluenceSign, 0.2, 0,
			[]float64{1, 1}, nil, []float64{1, 0}, nil, 0},
		{"off", InfluenceOff, 0.2, 0,
			[]float64{1, 1}, []float64{2, 2}, []float64{1, 0}, []float64{1, 1}, 0},
		{"one agent has no peers", InfluenceSign, 0.2, 0,
			[]float64{0}, []float64{1}, []float64{0}, []float64{1}, 0},
	} {
		t.Run(tc.why, func(t *testing.T) {
			got := Influence(tc.mode, tc.eta, tc.i, tc.team, tc.teamNext, tc.correct, tc.corrNext)
			if !near(got, tc.want, 1e-15) {
				t.Errorf("got %g, want %g", got, tc.want)
			}
		})
	}
}

func TestGroupAdvantages(t *testing.T) {
	for _, tc := range []struct {
		why    string
		scores []float64
		noStd  bool
		want   []float64
	}{
		// mean 0.4, deviations 0.6/-0.4, unbiased variance 1.2/4 = 0.3.
		{"two of five right", []float64{1, 0, 0, 1, 0}, false, []float64{
			0.6 / (math.Sqrt(0.3) + 1e-6), -0.4 / (math.Sqrt(0.3) + 1e-6), -0.4 / (math.Sqrt(0.3) + 1e-6),
			0.6 / (math.Sqrt(0.3) + 1e-6), -0.4 / (math.Sqrt(0.3) + 1e-6)}},
		{"tie group: all equal gives zero, not NaN", []float64{2, 2, 2}, false, []float64{0, 0, 0}},
		// Reference section 8 item 2: a 1e-3 KL spread becomes an O(1) advantage.
		{"tie group with KL spread is O(1)", []float64{2 - 0.001, 2 - 0.003}, false, []float64{
			0.001 / (math.Sqrt(2e-6) + 1e-6), -0.001 / (math.Sqrt(2e-6) + 1e-6)}},
		{"singleton: mean 0, std 1", []float64{3}, false, []float64{3 / (1 + 1e-6)}},
		{"Dr.GRPO centres only", []float64{1, 0, 0, 1, 0}, true, []float64{0.6, -0.4, -0.4, 0.6, -0.4}},
		{"Dr.GRPO singleton keeps its score", []float64{2}, true, []float64{2}},
		{"empty group", nil, false, []float64{}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			checkSlice(t, "advantage", GroupAdvantages(tc.scores, tc.noStd), tc.want)
		})
	}
}

func TestNLLWeights(t *testing.T) {
	// mean 2, population std sqrt(2/3).
	s := math.Sqrt(2.0 / 3)
	for _, tc := range []struct {
		why   string
		nll   []float64
		alpha float64
		want  []float64
	}{
		{"confident responses weigh more", []float64{1, 2, 3}, 0.25, []float64{
			math.Exp(0.25 / (s + 1e-8)), 1, math.Exp(-0.25 / (s + 1e-8))}},
		{"equal NLLs weigh 1", []float64{0.7, 0.7, 0.7}, 0.25, []float64{1, 1, 1}},
		// One outlier among five has |z| = 2 with the population std, the bound of section 3.5.
		{"outlier reaches the bound exp(-0.5)", []float64{5, 0, 0, 0, 0}, 0.25, []float64{
			math.Exp(-0.25 * 4 / (2 + 1e-8)), math.Exp(0.25 * 1 / (2 + 1e-8)), math.Exp(0.25 * 1 / (2 + 1e-8)),
			math.Exp(0.25 * 1 / (2 + 1e-8)), math.Exp(0.25 * 1 / (2 + 1e-8))}},
		{"alpha 0 switches the weight off", []float64{1, 9}, 0, []float64{1, 1}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			checkSlice(t, "weight", NLLWeights(tc.nll, tc.alpha), tc.want)
		})
	}
}

func TestKLSumAndMeanNLL(t *testing.T) {
	// k1 per token is old - ref and may be negative; it is summed, not clamped.
	if got := KLSum([]float32{-1, -2}, []float32{-1.5, -1}); !near(got, -0.5, 1e-12) {
		t.Errorf("KLSum = %g, want -0.5", got)
	}
	if got := MeanNLL([]float32{-1, -3}); !near(got, 4/(2+1e-8), 1e-12) {
		t.Errorf("MeanNLL = %g, want 2", got)
	}
	if got := MeanNLL(nil); got != 0 {
		t.Errorf("MeanNLL of an empty response = %g, want 0", got)
	}
	if got := Score(2, 0.2, 0.001, 30); !near(got, 2.17, 1e-12) {
		t.Errorf("Score = %g, want 2 + 0.2 - 0.03", got)
	}
}

// The closed form of reference section 3.7 on a two-agent, two-turn, two-trajectory record.
func TestGroupAdvantageClosedForm(t *testing.T) {
	// correct[t][agent][traj]
	correct := [][][]float64{
		{{1, 0}, {0, 0}},
		{{1, 1}, {1, 0}},
	}
	kl := []float64{0.5, -0.5}
	nll := []float64{1, 3}
	umad, err := LookupAlgo("umad")
	if err != nil {
		t.Fatal(err)
	}
	ippo, _ := LookupAlgo("ippo")

	// umad, agent 0, turn 0: team (1, 0); next team (2, 1): both rise, influence +0.2 each.
	g, err := umad.GroupAdvantage(correct, 0, 0, kl, nll)
	if err != nil {
		t.Fatal(err)
	}
	checkSlice(t, "team", g.Team, []float64{1, 0})
	checkSlice(t, "influence", g.Influence, []float64{0.2, 0.2})
	checkSlice(t, "scores", g.Scores, []float64{1 + 0.2 - 0.0005, 0 + 0.2 + 0.0005})
	// Scores differ by 0.999: deviations ±0.4995, unbiased std 0.4995*sqrt(2); NLL z = ∓1.
	a := 0.4995 / (0.4995*math.Sqrt2 + 1e-6)
	w0, w1 := math.Exp(0.25/(1+1e-8)), math.Exp(-0.25/(1+1e-8))
	checkSlice(t, "weights", g.Weights, []float64{w0, w1})
	checkSlice(t, "advantages", g.Advantages, []float64{a * w0, -a * w1})

	// Last turn: no influence.
	g, err = umad.GroupAdvantage(correct, 1, 1, kl, nll)
	if err != nil {
		t.Fatal(err)
	}
	checkSlice(t, "team at turn 1", g.Team, []float64{2, 1})
	checkSlice(t, "influence at the last turn", g.Influence, []float64{0, 0})

	// ippo: same team scores, no influence, no weights.
	g, err = ippo.GroupAdvantage(correct, 0, 0, kl, nll)
	if err != nil {
		t.Fatal(err)
	}
	checkSlice(t, "ippo weights", g.Weights, []float64{1, 1})
	checkSlice(t, "ippo scores", g.Scores, []float64{1 - 0.0005, 0.0005})
	a = 0.999 / 2 / (0.999/2*math.Sqrt2 + 1e-6)
	checkSlice(t, "ippo advantages", g.Advantages, []float64{a, -a})

	for _, bad := range []struct {
		why     string
		t, a    int
		kl, nll []float64
	}{
		{"turn out of range", 2, 0, kl, nll},
		{"agent out of range", 0, 2, kl, nll},
		{"wrong number of KL sums", 0, 0, kl[:1], nll},
	} {
		if _, err := umad.GroupAdvantage(correct, bad.t, bad.a, bad.kl, bad.nll); err == nil {
			t.Errorf("%s: want an error", bad.why)
		}
	}
}
