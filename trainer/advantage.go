// Package trainer turns debate rollouts into gradient steps: rewards, advantages, the
// policy update through the libtorch plugin, weight sync back to llama.cpp, checkpoints.
//
// The formulas follow spec/UMAD-reference.md section 3 (the authors' code) by default; the
// paper's variants are named options.
package trainer

import (
	"fmt"
	"math"
)

// TeamMode is how the agents' correctness at one turn and trajectory becomes the reward
// each agent is trained on (reference section 2.3).
type TeamMode string

const (
	TeamSum        TeamMode = "sum"        // every agent gets the sum over agents (the reference)
	TeamMax        TeamMode = "max"        // every agent gets the best agent's correctness
	TeamDictator   TeamMode = "dictator"   // every agent gets agent 0's correctness
	TeamIndividual TeamMode = "individual" // every agent keeps its own correctness
)

// ParseTeamMode checks a team-reward mode name.
func ParseTeamMode(s string) (TeamMode, error) {
	switch m := TeamMode(s); m {
	case TeamSum, TeamMax, TeamDictator, TeamIndividual:
		return m, nil
	}
	return "", fmt.Errorf("unknown team reward %q (want sum, max, dictator or individual)", s)
}

// TeamRewards maps correct[a] (agent a's 0/1 correctness at one turn and trajectory) to
// the reward each agent receives.
func TeamRewards(correct []float64, mode TeamMode) ([]float64, error) {
	out := make([]float64, len(correct))
	if len(correct) == 0 {
		return out, nil
	}
	var v float64
	switch mode {
	case TeamSum:
		for _, c := range correct {
			v += c
		}
	case TeamMax:
		v = correct[0]
		for _, c := range correct[1:] {
			v = math.Max(v, c)
		}
	case TeamDictator:
		v = correct[0]
	case TeamIndividual:
		copy(out, correct)
		return out, nil
	default:
		return nil, fmt.Errorf("unknown team reward %q", mode)
	}
	for i := range out {
		out[i] = v
	}
	return out, nil
}

// InfluenceMode selects the epistemic-influence intrinsic reward.
type InfluenceMode string

const (
	InfluenceOff InfluenceMode = ""
	// InfluenceSign is the reference: eta * sign(mean over peers j of
	// team_j(t+1) - team_j(t)), per trajectory, from the team (aggregated) rewards, so
	// with the sum mode it includes the agent's own change (reference section 3.2).
	InfluenceSign InfluenceMode = "sign"
	// InfluencePeerMean is the paper's eta/(N-1) * sum over peers j of the peer's own
	// correctness change, per trajectory. (Averaging the change over the group first, as
	// one reading of the paper has it, would add the same constant to every trajectory of a
	// group, which the group normalisation then removes; per trajectory it can matter.)
	InfluencePeerMean InfluenceMode = "peer-mean"
)

// ParseInfluenceMode checks an influence-reward variant name.
func ParseInfluenceMode(s string) (InfluenceMode, error) {
	switch m := InfluenceMode(s); m {
	case InfluenceOff, InfluenceSign, InfluencePeerMean:
		return m, nil
	case "off", "none":
		return InfluenceOff, nil
	}
	return "", fmt.Errorf("unknown influence reward %q (want sign, peer-mean or off)", s)
}

// Influence is the intrinsic reward of agent i at turn t of one trajectory. team[j] and
// teamNext[j] are agent j's team rewards at turns t and t+1; correct and correctNext are
// the agents' own correctness at those turns. Turns with no next turn get none: the
// caller passes nil teamNext. All inputs are the unmodified rewards, so the result does
// not depend on the order agents are processed in (reference section 3.2's last point).
func Influence(mode InfluenceMode, eta float64, i int, team, teamNext, correct, correctNext []float64) float64 {
	n := len(team)
	if mode == InfluenceOff || teamNext == nil || n < 2 {
		return 0
	}
	var sum float64
	for j := 0; j < n; j++ {
		if j == i {
			continue
		}
		switch mode {
		case InfluenceSign:
			sum += teamNext[j] - team[j]
		case InfluencePeerMean:
			sum += correctNext[j] - correct[j]
		}
	}
	mean := sum / float64(n-1)
	if mode == InfluenceSign {
		return eta * sign(mean)
	}
	return eta * mean
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// KLSum is the k1 estimate of the response's KL to the reference, summed over its tokens:
// the quantity the reference subtracts, times a coefficient, from the score (section 3.3).
func KLSum(old, ref []float32) float64 {
	var s float64
	for l := range old {
		s += float64(old[l]) - float64(ref[l])
	}
	return s
}

// Score is one response's scalar reward before group normalisation.
func Score(team, influence, klCoef, klSum float64) float64 {
	return team + influence - klCoef*klSum
}

// Group-normalisation epsilons, as in the reference (section 8 item 16).
const (
	advantageEps = 1e-6
	nllEps       = 1e-8
)

// GroupAdvantages normalises the scores of one group (same problem, agent and turn): (S -
// mean) / (unbiased std + 1e-6), or with noStd (Dr.GRPO) only S - mean. A group of one has
// mean 0 and std 1, so its advantage is its score (reference section 3.4).
func GroupAdvantages(scores []float64, noStd bool) []float64 {
	out := make([]float64, len(scores))
	if len(scores) == 0 {
		return out
	}
	mean, std := 0.0, 1.0
	if len(scores) > 1 {
		mean = meanOf(scores)
		var ss float64
		for _, s := range scores {
			ss += (s - mean) * (s - mean)
		}
		std = math.Sqrt(ss / float64(len(scores)-1))
	}
	for k, s := range scores {
		if noStd {
			out[k] = s - mean
		} else {
			out[k] = (s - mean) / (std + advantageEps)
		}
	}
	return out
}

// MeanNLL is the token-mean negative log-likelihood of a response, as the reference
// computes it (sum / (count + 1e-8), so an empty response has 0).
func MeanNLL(logp []float32) float64 {
	var s float64
	for _, v := range logp {
		s -= float64(v)
	}
	return s / (float64(len(logp)) + nllEps)
}

// NLLWeights are the aleatoric advantage weights of one group: exp(-alpha * z) with z the
// NLL standardised by the group's population std (+1e-8). Equal NLLs give weight 1
// (reference section 3.5).
func NLLWeights(nll []float64, alpha float64) []float64 {
	out := make([]float64, len(nll))
	if len(nll) == 0 {
		return out
	}
	mean := meanOf(nll)
	var ss float64
	for _, v := range nll {
		ss += (v - mean) * (v - mean)
	}
	std := math.Sqrt(ss / float64(len(nll)))
	for k, v := range nll {
		out[k] = math.Exp(-alpha * (v - mean) / (std + nllEps))
	}
	return out
}

// meanOf is the mean; for equal values it is that value exactly, so a tie group's
// deviations are exactly 0 and not rounding noise divided by a tiny epsilon.
func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	equal := true
	for _, x := range v {
		s += x
		equal = equal && x == v[0]
	}
	if equal {
		return v[0]
	}
	return s / float64(len(v))
}
