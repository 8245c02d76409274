package trainer

// Advantages: scores normalised within a GRPO group, and the aleatoric (NLL) weights
// (spec/UMAD-reference.md sections 3.4-3.7).

import (
	"fmt"
	"math"

	"github.com/umad-dev/umad/trainlog"
)

// Group is one GRPO group's rewards and advantages: agent a's K trajectories of one
// problem at one turn.
type Group struct {
	Team, Influence, Scores []float64
	// Advantages are the final ones, NLL weights applied.
	Advantages []float64
	Weights    []float64 // NLL weights; all 1 when the algorithm has none
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

// GroupAdvantage applies the algorithm to agent a at turn t of one problem. correct[t][j][k] is
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

// advantages computes the GRPO groups of one agent at one turn from the step's correctness
// (correct[p][t][a][k]) and the batch's log-probs: per-token advantages, the groups that
// dynamic sampling drops, and the reward, KL, entropy and NLL metrics.
func (t *Trainer) advantages(b *turnBatch, correct [][][][]float64, turn, agent int, m *trainlog.StepMetrics) error {
	G := t.cfg.G
	b.adv = make([][]float32, len(b.refs))
	b.dropped = make([]bool, len(b.refs)/G)
	b.rows = make([]sampleRow, len(b.refs))
	for start := 0; start < len(b.refs); start += G {
		p := b.refs[start].p
		klSums := make([]float64, G)
		nll := make([]float64, G)
		for k := 0; k < G; k++ {
			i := start + k
			klSums[k] = KLSum(b.old[i], b.ref[i])
			nll[k] = MeanNLL(b.old[i])
			r := &b.rows[i]
			r.KLSum, r.NLL, r.Tokens, r.PromptTokens = klSums[k], nll[k], float64(len(b.old[i])), float64(len(b.prompts[i]))
			for j := range b.old[i] {
				r.Entropy += float64(b.ent[i][j])
				d := float64(b.old[i][j]) - float64(b.rolloutLogp[i][j])
				r.Gap += math.Abs(d)
				r.GapMax = math.Max(r.GapMax, math.Abs(d))
				r.RolloutK3 += math.Expm1(d) - d
			}
		}
		g, err := t.cfg.Algo.GroupAdvantage(correct[p], turn, agent, klSums, nll)
		if err != nil {
			return err
		}
		b.dropped[start/G] = t.cfg.DynamicSampling && !g.RewardsVary()
		for k := 0; k < G; k++ {
			i := start + k
			b.adv[i] = make([]float32, len(b.responses[i]))
			for j := range b.adv[i] {
				b.adv[i][j] = float32(g.Advantages[k])
			}
			r := &b.rows[i]
			r.Correct, r.Advantage, r.Weight = correct[p][turn][agent][k], g.Advantages[k], g.Weights[k]
			r.Team, r.Influence, r.Score, r.Dropped = g.Team[k], g.Influence[k], g.Scores[k], b.dropped[start/G]
		}
	}
	return nil
}

// sampleRow is what one response contributes to a step's metrics.
type sampleRow struct {
	KLSum, NLL, Entropy, Gap, RolloutK3, Tokens        float64 // sums over its tokens
	PromptTokens                                       float64 // its prompt's length
	GapMax                                             float64 // largest |trainer - rollout log-prob|
	Correct, Advantage, Weight, Team, Influence, Score float64
	Dropped                                            bool // its group was dropped
}

// rowMetrics fills the reward, advantage, KL, entropy and NLL metrics from the rows of the
// step's responses (groups of G rows, in the step's order).
func rowMetrics(rows []sampleRow, G int, m *trainlog.StepMetrics) {
	var advAll, weights, team, infl, score, nlls []float64
	var klTok, entTok, gapTok, k3Tok, tokens, prompts float64
	for i, r := range rows {
		klTok, entTok, gapTok, k3Tok, tokens = klTok+r.KLSum, entTok+r.Entropy, gapTok+r.Gap, k3Tok+r.RolloutK3, tokens+r.Tokens
		prompts += r.PromptTokens
		m.LogpGapMax = math.Max(m.LogpGapMax, r.GapMax)
		m.Accuracy += r.Correct
		if r.Dropped && i%G == 0 {
			m.DroppedGroups++
		}
		advAll, weights = append(advAll, r.Advantage), append(weights, r.Weight)
		team, infl, score, nlls = append(team, r.Team), append(infl, r.Influence), append(score, r.Score), append(nlls, r.NLL)
	}
	if n := float64(len(rows)); n > 0 {
		m.Accuracy /= n
	}
	m.Team, m.Influence, m.Score, m.NLL = meanOf(team), meanOf(infl), meanOf(score), meanOf(nlls)
	m.Advantage = summarise(advAll)
	m.Weight = summarise(weights)
	m.Tokens, m.PromptTokens = int(tokens), int(prompts)
	if tokens > 0 {
		m.KL, m.Entropy, m.LogpGap, m.RolloutKL = klTok/tokens, entTok/tokens, gapTok/tokens, k3Tok/tokens
	}
}
