package trainer

import (
	"fmt"
	"strings"
)

// Algo is the reward and advantage recipe of a training run. The named algorithms differ
// along four axes: the team reward (Team), the influence reward (Influence, Eta), the
// advantage normaliser (NLLAlpha, NoStd) and where the KL to the reference goes
// (KLRewardCoef or KLLossCoef).
type Algo struct {
	Name string `json:"name"`
	// Debate: more than one agent and more than one turn are allowed.
	Debate bool     `json:"debate"`
	Team   TeamMode `json:"team"`
	// KLRewardCoef subtracts KLRewardCoef * sum_tokens(old - ref) (k1) from the score.
	KLRewardCoef float64 `json:"kl_reward_coef"`
	// KLLossCoef adds KLLossCoef * k3 KL to the loss (the single-agent GRPO baseline).
	KLLossCoef float64 `json:"kl_loss_coef"`
	// NLLAlpha > 0 weights advantages by exp(-alpha * z(NLL)).
	NLLAlpha  float64       `json:"nll_alpha"`
	Influence InfluenceMode `json:"influence,omitempty"`
	Eta       float64       `json:"eta"`
	// NoStd is Dr.GRPO's advantage: centred, not divided by the group std.
	NoStd bool `json:"no_std"`
}

// The reference run's constants (spec/UMAD-reference.md section 3.7).
const (
	DefaultKLCoef   = 0.001 // KL coefficient, in the reward (k1) or the loss (k3)
	DefaultEta      = 0.2   // influence reward strength
	DefaultNLLAlpha = 0.25  // NLL advantage weight exponent
)

// recipes are the named algorithms, in the order help texts list them.
var recipes = []Algo{
	// Single-agent GRPO: individual correctness, k3 KL in the loss (reference section 4.2,
	// the single-agent baseline's use_kl_loss with low_var_kl 0.001).
	{Name: "grpo", Team: TeamIndividual, KLLossCoef: DefaultKLCoef},
	// IPPO: the debate with a shared team reward and k1 KL in the reward (section 3.3).
	{Name: "ippo", Debate: true, Team: TeamSum, KLRewardCoef: DefaultKLCoef},
	// UMAD: IPPO plus the NLL weight and the influence reward.
	{Name: "umad", Debate: true, Team: TeamSum, KLRewardCoef: DefaultKLCoef, NLLAlpha: DefaultNLLAlpha, Influence: InfluenceSign, Eta: DefaultEta},
	{Name: "nll-only", Debate: true, Team: TeamSum, KLRewardCoef: DefaultKLCoef, NLLAlpha: DefaultNLLAlpha},
	{Name: "intrinsic-only", Debate: true, Team: TeamSum, KLRewardCoef: DefaultKLCoef, Influence: InfluenceSign, Eta: DefaultEta},
}

// AlgoNames lists the named algorithms in a fixed order.
func AlgoNames() []string {
	names := make([]string, len(recipes))
	for i, r := range recipes {
		names[i] = r.Name
	}
	return names
}

// LookupAlgo returns the named recipe.
func LookupAlgo(name string) (Algo, error) {
	for _, r := range recipes {
		if r.Name == name {
			return r, nil
		}
	}
	return Algo{}, fmt.Errorf("unknown algorithm %q (want %s)", name, strings.Join(AlgoNames(), ", "))
}

// Describe says what the recipe does along each axis, for help texts.
func (a Algo) Describe() string {
	var parts []string
	if a.Debate {
		parts = append(parts, "debate, team reward "+string(a.Team))
	} else {
		parts = append(parts, "one agent, one turn, own correctness")
	}
	if a.Influence != InfluenceOff {
		parts = append(parts, fmt.Sprintf("influence reward %s (eta %g)", a.Influence, a.Eta))
	}
	if a.NLLAlpha > 0 {
		parts = append(parts, fmt.Sprintf("NLL weight exp(-%g z)", a.NLLAlpha))
	}
	if a.NoStd {
		parts = append(parts, "advantages centred only (Dr.GRPO)")
	}
	switch {
	case a.KLLossCoef != 0:
		parts = append(parts, fmt.Sprintf("k3 KL %g in the loss", a.KLLossCoef))
	case a.KLRewardCoef != 0:
		parts = append(parts, fmt.Sprintf("k1 KL %g in the reward", a.KLRewardCoef))
	}
	return strings.Join(parts, ", ")
}

// AlgoHelp lists every named algorithm with its description, one per line.
func AlgoHelp() string {
	var b strings.Builder
	for _, r := range recipes {
		fmt.Fprintf(&b, "  %-15s %s\n", r.Name, r.Describe())
	}
	return b.String()
}

// Overrides are changes to a recipe's axes, as flags give them; the zero value changes
// nothing.
type Overrides struct {
	Team      string   // team reward mode; "" keeps the recipe's
	Influence string   // influence reward mode; "" keeps the recipe's
	Eta       *float64 // influence strength
	NLLAlpha  *float64 // NLL weight exponent
	KLCoef    *float64 // the KL coefficient, wherever the KL goes
	KLInLoss  bool     // move the KL from the reward (k1) to the loss (k3), as the paper
	DrGRPO    bool     // advantages centred, not divided by the group std
}

// Override applies o to the recipe. Turning an influence reward on gives it the default
// strength unless Eta says otherwise; KLInLoss moves the reward's KL coefficient to the
// loss; KLCoef then sets the coefficient wherever the KL is.
func (a Algo) Override(o Overrides) (Algo, error) {
	var err error
	if o.Team != "" {
		if a.Team, err = ParseTeamMode(o.Team); err != nil {
			return a, err
		}
	}
	if o.Influence != "" {
		if a.Influence, err = ParseInfluenceMode(o.Influence); err != nil {
			return a, err
		}
		if a.Influence != InfluenceOff && a.Eta == 0 {
			a.Eta = DefaultEta
		}
	}
	if o.Eta != nil {
		a.Eta = *o.Eta
	}
	if o.NLLAlpha != nil {
		a.NLLAlpha = *o.NLLAlpha
	}
	if o.KLInLoss && a.KLLossCoef == 0 {
		a.KLLossCoef, a.KLRewardCoef = a.KLRewardCoef, 0
	}
	if o.KLCoef != nil {
		if a.KLLossCoef != 0 {
			a.KLLossCoef = *o.KLCoef
		} else {
			a.KLRewardCoef = *o.KLCoef
		}
	}
	a.NoStd = o.DrGRPO
	return a, nil
}

// Check validates the recipe against the run's shape.
func (a Algo) Check(agents, turns int) error {
	switch {
	case agents < 1:
		return fmt.Errorf("%s: no agents", a.Name)
	case !a.Debate && (agents != 1 || turns != 1):
		return fmt.Errorf("%s trains one agent for one turn; got %d agents and %d turns", a.Name, agents, turns)
	case a.Influence != InfluenceOff && agents < 2:
		return fmt.Errorf("%s: the influence reward needs at least two agents", a.Name)
	case a.NLLAlpha < 0 || a.Eta < 0 || a.KLRewardCoef < 0 || a.KLLossCoef < 0:
		return fmt.Errorf("%s: coefficients must not be negative", a.Name)
	}
	if _, err := ParseTeamMode(string(a.Team)); err != nil {
		return err
	}
	return nil
}
