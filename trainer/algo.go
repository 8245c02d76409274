package trainer

import (
	"fmt"
	"strings"
)

// Algo is a training run's algorithm: how it rewards and computes advantages. The named algorithms differ
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

// algos are the named algorithms, in the order help texts list them.
var algos = []Algo{
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
	names := make([]string, len(algos))
	for i, r := range algos {
		names[i] = r.Name
	}
	return names
}

// LookupAlgo returns the named algorithm.
func LookupAlgo(name string) (Algo, error) {
	for _, r := range algos {
		if r.Name == name {
			return r, nil
		}
	}
	return Algo{}, fmt.Errorf("unknown algorithm %q (want %s)", name, strings.Join(AlgoNames(), ", "))
}

// Describe says what the algorithm does along each axis, for help texts.
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
	for _, r := range algos {
		fmt.Fprintf(&b, "  %-15s %s\n", r.Name, r.Describe())
	}
	return b.String()
}

// Overrides are changes to an algorithm's axes, as flags give them; the zero value changes
// nothing.
type Overrides struct {
	Team      string   // team reward mode; "" keeps the algorithm's
	Influence string   // influence reward mode; "" keeps the algorithm's
	Eta       *float64 // influence strength
	NLLAlpha  *float64 // NLL weight exponent
	KLCoef    *float64 // the KL coefficient, wherever the KL goes
	KLInLoss  bool     // move the KL from the reward (k1) to the loss (k3), as the paper
	DrGRPO    bool     // advantages centred, not divided by the group std
}

// Override applies o to the algorithm. KLInLoss moves the reward's KL coefficient to the loss;
// KLCoef then sets the coefficient wherever the KL is. An override may change an axis's
// form or strength (sign or peer-mean influence, eta, alpha, the team reward's sum, max or
// dictator, the KL's place and coefficient: the paper and the reference code place the KL
// differently for the same algorithms), never what defines the algorithm: whether it has
// a team reward, an influence reward and an NLL weight. That is refused, naming the
// algorithm that has the combination, since the run would train it under another name.
func (a Algo) Override(o Overrides) (Algo, error) {
	before := a.defining()
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
			a.Eta = DefaultEta // a reward switched on, unless --eta 0 switches it off again
		}
	}
	if o.Eta != nil {
		a.Eta = *o.Eta
	}
	if o.NLLAlpha != nil {
		a.NLLAlpha = *o.NLLAlpha
	}
	after := a.defining()
	if o.Eta != nil && *o.Eta != 0 && a.Influence == InfluenceOff {
		if o.Influence != "" {
			return a, fmt.Errorf("--influence %s and --eta %g disagree: a strength for an influence reward that is off", o.Influence, *o.Eta)
		}
		after.influence = true // a strength for a reward the algorithm has not
	}
	if after != before {
		return a, a.refuse(o, before, after)
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

// defining are the axes that tell the named algorithms apart.
type defining struct{ debate, team, influence, nll bool }

func (a Algo) defining() defining {
	return defining{debate: a.Debate, team: a.Team != TeamIndividual,
		influence: a.Influence != InfluenceOff && a.Eta != 0, nll: a.NLLAlpha != 0}
}

// refuse says which flags would change which defining axis of a (before) and what
// algorithm has the result (after).
func (a Algo) refuse(o Overrides, before, after defining) error {
	var flags, changed []string
	has := func(b bool, article, what string) string {
		if b {
			return "has " + article + " " + what
		}
		return "has no " + what
	}
	if before.team != after.team {
		flags = append(flags, "--team "+o.Team)
		changed = append(changed, has(before.team, "a", "team reward"))
	}
	if before.influence != after.influence {
		if o.Influence != "" {
			flags = append(flags, "--influence "+o.Influence)
		}
		if o.Eta != nil {
			flags = append(flags, fmt.Sprintf("--eta %g", *o.Eta))
		}
		changed = append(changed, has(before.influence, "an", "influence reward"))
	}
	if before.nll != after.nll {
		flags = append(flags, fmt.Sprintf("--nll-alpha %g", *o.NLLAlpha))
		changed = append(changed, has(before.nll, "an", "NLL weight"))
	}
	that := "no named algorithm has that combination"
	for _, r := range algos {
		if r.defining() == after {
			that = fmt.Sprintf("that is %s (--algo %s)", r.Name, r.Name)
		}
	}
	return fmt.Errorf("--algo %s %s: %s %s; %s", a.Name, strings.Join(flags, " "), a.Name, strings.Join(changed, " and "), that)
}

// Check validates the algorithm against the run's shape.
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
