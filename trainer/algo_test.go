package trainer

import (
	"strings"
	"testing"
)

func TestAlgorithms(t *testing.T) {
	for _, tc := range []struct {
		name           string
		agents, turns  int
		wantErr        string
		nll, influence bool
	}{
		{"grpo", 1, 1, "", false, false},
		{"grpo", 2, 2, "one agent", false, false},
		{"ippo", 2, 2, "", false, false},
		{"umad", 2, 2, "", true, true},
		{"umad", 1, 2, "two agents", true, true},
		{"nll-only", 2, 2, "", true, false},
		{"intrinsic-only", 2, 2, "", false, true},
		{"ppo", 2, 2, "unknown algorithm", false, false},
	} {
		a, err := LookupAlgo(tc.name)
		if err == nil {
			err = a.Check(tc.agents, tc.turns)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s with %d agents, %d turns: error %v, want one mentioning %q", tc.name, tc.agents, tc.turns, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if (a.NLLAlpha > 0) != tc.nll || (a.Influence != InfluenceOff) != tc.influence {
			t.Errorf("%s: NLL weight %v, influence %q; want %v, %v", tc.name, a.NLLAlpha, a.Influence, tc.nll, tc.influence)
		}
	}
}

func TestOverride(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		algo string
		o    Overrides
		want func(Algo) Algo
	}{
		{"umad", Overrides{}, func(a Algo) Algo { return a }},
		// The paper's variant: the reward's KL coefficient moves to the loss.
		{"umad", Overrides{KLInLoss: true}, func(a Algo) Algo { a.KLLossCoef, a.KLRewardCoef = DefaultKLCoef, 0; return a }},
		{"umad", Overrides{KLInLoss: true, KLCoef: f(0.01)}, func(a Algo) Algo { a.KLLossCoef, a.KLRewardCoef = 0.01, 0; return a }},
		{"ippo", Overrides{KLCoef: f(0.02)}, func(a Algo) Algo { a.KLRewardCoef = 0.02; return a }},
		// grpo's KL is in the loss already: --kl-in-loss changes nothing, --kl-coef sets it.
		{"grpo", Overrides{KLInLoss: true, KLCoef: f(0.05)}, func(a Algo) Algo { a.KLLossCoef = 0.05; return a }},
		{"umad", Overrides{Team: "max", NLLAlpha: f(0.5), DrGRPO: true}, func(a Algo) Algo { a.Team, a.NLLAlpha, a.NoStd = TeamMax, 0.5, true; return a }},
		// Axes that define no algorithm stay free: the influence reward's form and strength
		// where there is one, alpha where there is an NLL weight, the team reward's form, the
		// KL's place and coefficient.
		{"umad", Overrides{Influence: "peer-mean", Eta: f(0.25)}, func(a Algo) Algo { a.Influence, a.Eta = InfluencePeerMean, 0.25; return a }},
		{"intrinsic-only", Overrides{Influence: "sign", Eta: f(0.5)}, func(a Algo) Algo { a.Eta = 0.5; return a }},
		{"nll-only", Overrides{NLLAlpha: f(1)}, func(a Algo) Algo { a.NLLAlpha = 1; return a }},
		{"ippo", Overrides{Team: "dictator", KLInLoss: true}, func(a Algo) Algo {
			a.Team, a.KLLossCoef, a.KLRewardCoef = TeamDictator, DefaultKLCoef, 0
			return a
		}},
		{"grpo", Overrides{Team: "individual"}, func(a Algo) Algo { return a }},
	} {
		base, err := LookupAlgo(tc.algo)
		if err != nil {
			t.Fatal(err)
		}
		got, err := base.Override(tc.o)
		if err != nil {
			t.Errorf("%s %+v: %v", tc.algo, tc.o, err)
			continue
		}
		if want := tc.want(base); got != want {
			t.Errorf("%s %+v:\n got %+v\nwant %+v", tc.algo, tc.o, got, want)
		}
	}
	umad, _ := LookupAlgo("umad")
	for _, o := range []Overrides{{Team: "all"}, {Influence: "loud"}} {
		if _, err := umad.Override(o); err == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
}

// Every named algorithm is described along its axes in the help text.
func TestAlgoHelp(t *testing.T) {
	help := AlgoHelp()
	for _, name := range AlgoNames() {
		a, _ := LookupAlgo(name)
		if !strings.Contains(help, name) || !strings.Contains(help, a.Describe()) {
			t.Errorf("help lacks %s: %s", name, help)
		}
	}
	if d, _ := LookupAlgo("umad"); !strings.Contains(d.Describe(), "influence reward sign") || !strings.Contains(d.Describe(), "NLL weight") {
		t.Errorf("umad described as %q", d.Describe())
	}
}

// A flag that changes what defines the algorithm is refused, naming the algorithm that has
// the combination: --algo ippo --influence peer-mean once trained intrinsic-only as "ippo".
func TestOverrideRefusesAnotherAlgorithm(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		algo string
		o    Overrides
		want string
	}{
		{"ippo", Overrides{Influence: "peer-mean"}, "--algo ippo --influence peer-mean: ippo has no influence reward; that is intrinsic-only (--algo intrinsic-only)"},
		{"ippo", Overrides{Influence: "peer-mean", Eta: f(0.25)}, "that is intrinsic-only"},
		{"ippo", Overrides{Eta: f(0.25)}, "--algo ippo --eta 0.25: ippo has no influence reward; that is intrinsic-only"},
		{"nll-only", Overrides{Influence: "sign"}, "that is umad"},
		{"nll-only", Overrides{Eta: f(0.2)}, "that is umad"},
		{"ippo", Overrides{NLLAlpha: f(0.25)}, "ippo has no NLL weight; that is nll-only"},
		{"intrinsic-only", Overrides{NLLAlpha: f(0.25)}, "that is umad"},
		{"umad", Overrides{Influence: "off"}, "umad has an influence reward; that is nll-only"},
		{"umad", Overrides{Eta: f(0)}, "--algo umad --eta 0: umad has an influence reward; that is nll-only"},
		{"umad", Overrides{NLLAlpha: f(0)}, "umad has an NLL weight; that is intrinsic-only"},
		{"umad", Overrides{Influence: "off", NLLAlpha: f(0)}, "umad has an influence reward and has an NLL weight; that is ippo"},
		{"intrinsic-only", Overrides{Influence: "off"}, "that is ippo"},
		{"ippo", Overrides{Team: "individual"}, "ippo has a team reward; no named algorithm has that combination"},
		{"grpo", Overrides{Team: "sum"}, "grpo has no team reward; no named algorithm"},
		{"grpo", Overrides{NLLAlpha: f(0.25)}, "grpo has no NLL weight; no named algorithm"},
		{"umad", Overrides{Influence: "off", Eta: f(0.3)}, "--influence off and --eta 0.3 disagree"},
	} {
		base, err := LookupAlgo(tc.algo)
		if err != nil {
			t.Fatal(err)
		}
		_, err = base.Override(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: error %v, want one with %q", tc.algo, tc.o, err, tc.want)
		}
	}
}
