package trainer

// Rewards for training: a response's 0/1 correctness, the team reward, the influence
// reward and the KL-penalised score (spec/UMAD-reference.md sections 2.3 and 3.1-3.3).

import (
	"fmt"
	"math"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/grade"
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

// correctness is c[t][a][k] of one record: agent a's 0/1 reward in trajectory k at turn t,
// graded in the run's mode.
func correctness(r debate.Record, mode grade.Mode) [][][]float64 {
	c := make([][][]float64, len(r.Turns))
	for tt, turn := range r.Turns {
		c[tt] = make([][]float64, len(turn))
		for a, byTraj := range turn {
			c[tt][a] = make([]float64, len(byTraj))
			for k, at := range byTraj {
				if at.Grade.Correct(mode) {
					c[tt][a][k] = 1
				}
			}
		}
	}
	return c
}
