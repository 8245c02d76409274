package trainer

import (
	"fmt"
	"strings"
)

// Algo is the reward and advantage recipe of a training run.
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

// Algorithms are the named recipes, with the reference run's constants.
var algorithms = map[string]Algo{
	// Single-agent GRPO: individual correctness, k3 KL in the loss (reference section 4.2,
	// the single-agent baseline's use_kl_loss with low_var_kl 0.001).
	"grpo": {Team: TeamIndividual, KLLossCoef: 0.001},
	// IPPO: the debate with a shared team reward and k1 KL in the reward (section 3.3).
	"ippo": {Debate: true, Team: TeamSum, KLRewardCoef: 0.001},
	// UMAD: IPPO plus the NLL weight (alpha 0.25) and the influence reward (eta 0.2).
	"umad":           {Debate: true, Team: TeamSum, KLRewardCoef: 0.001, NLLAlpha: 0.25, Influence: InfluenceSign, Eta: 0.2},
	"nll-only":       {Debate: true, Team: TeamSum, KLRewardCoef: 0.001, NLLAlpha: 0.25},
	"intrinsic-only": {Debate: true, Team: TeamSum, KLRewardCoef: 0.001, Influence: InfluenceSign, Eta: 0.2},
}

// AlgoNames lists the recipes in a fixed order, for help texts.
var AlgoNames = []string{"grpo", "ippo", "umad", "nll-only", "intrinsic-only"}

// LookupAlgo returns the named recipe.
func LookupAlgo(name string) (Algo, error) {
	a, ok := algorithms[name]
	if !ok {
		return Algo{}, fmt.Errorf("unknown algorithm %q (want %s)", name, strings.Join(AlgoNames, ", "))
	}
	a.Name = name
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

// Group is one GRPO group's rewards and advantages: agent a's K trajectories of one
// problem at one turn.
type Group struct {
	Team, Influence, Scores []float64
	// Advantages are the final ones, NLL weights applied.
	Advantages []float64
	Weights    []float64 // NLL weights; all 1 when the recipe has none
}

// RewardsVary reports whether the group's rewards (team reward plus influence, before
// the KL term) are not all equal, i.e. whether the group carries a learning signal.
func (g Group) RewardsVary() bool {
	for k := range g.Team {
		if g.Team[k]+g.Influence[k] != g.Team[0]+g.Influence[0] {
			return true
		}
	}
	return false
}

// GroupAdvantage applies the recipe to agent a at turn t of one problem. correct[t][j][k] is
// agent j's 0/1 correctness in trajectory k at turn t; klSums[k] and nll[k] come from agent
// a's recomputed log-probs of trajectory k's response (section 3.7's closed form).
func (a Algo) GroupAdvantage(correct [][][]float64, t, agent int, klSums, nll []float64) (Group, error) {
	if t < 0 || t >= len(correct) || agent < 0 || agent >= len(correct[t]) {
		return Group{}, fmt.Errorf("turn %d agent %d outside the %d-turn record", t, agent, len(correct))
	}
	k := len(correct[t][agent])
	if len(klSums) != k || len(nll) != k {
		return Group{}, fmt.Errorf("%d trajectories but %d KL sums and %d NLLs", k, len(klSums), len(nll))
	}
	g := Group{Team: make([]float64, k), Influence: make([]float64, k), Scores: make([]float64, k)}
	agents := len(correct[t])
	at := func(turn, traj int) ([]float64, []float64, error) {
		c := make([]float64, agents)
		for j := range c {
			if len(correct[turn][j]) != k {
				return nil, nil, fmt.Errorf("turn %d agent %d has %d trajectories, want %d", turn, j, len(correct[turn][j]), k)
			}
			c[j] = correct[turn][j][traj]
		}
		team, err := TeamRewards(c, a.Team)
		return c, team, err
	}
	for traj := 0; traj < k; traj++ {
		c, team, err := at(t, traj)
		if err != nil {
			return Group{}, err
		}
		var cNext, teamNext []float64
		if t+1 < len(correct) {
			if cNext, teamNext, err = at(t+1, traj); err != nil {
				return Group{}, err
			}
		}
		g.Team[traj] = team[agent]
		g.Influence[traj] = Influence(a.Influence, a.Eta, agent, team, teamNext, c, cNext)
		g.Scores[traj] = Score(g.Team[traj], g.Influence[traj], a.KLRewardCoef, klSums[traj])
	}
	g.Advantages = GroupAdvantages(g.Scores, a.NoStd)
	g.Weights = make([]float64, k)
	for i := range g.Weights {
		g.Weights[i] = 1
	}
	if a.NLLAlpha > 0 {
		g.Weights = NLLWeights(nll, a.NLLAlpha)
		for i := range g.Advantages {
			g.Advantages[i] *= g.Weights[i]
		}
	}
	return g, nil
}
