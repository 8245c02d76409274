package uncertainty

import (
	"errors"
	"fmt"
	"strings"

	"github.com/umad-dev/umad/reward"
)

// Answer is one graded response.
type Answer struct {
	// Key is the canonical key of the extracted answer (reward.Key); ignored when
	// NoAnswer is set.
	Key      string `json:"key,omitempty"`
	NoAnswer bool   `json:"no_answer,omitempty"`
	// Strict and Robust report correctness in the two grading modes.
	Strict bool `json:"strict"`
	Robust bool `json:"robust"`
	// Tokens is the response length in tokens, EOS included.
	Tokens    int  `json:"tokens"`
	Truncated bool `json:"truncated,omitempty"` // stopped by the length limit, not by EOS
	Boxed     bool `json:"boxed,omitempty"`     // the response contains "\boxed"
	// MeanEntropy and MeanNLL are per-token means over the response of the sampling
	// distribution's entropy and of the sampled tokens' negative log-probability.
	MeanEntropy float64 `json:"mean_entropy"`
	MeanNLL     float64 `json:"mean_nll"`
}

// Grade fills the answer fields of an Answer from a response and the gold answer:
// Key and NoAnswer from reward.Extract, Strict from reward.StrictScore, Robust from
// reward.Score in robust mode, and Boxed. The caller adds the token statistics.
func Grade(response, gold string, opt reward.ExtractOptions) Answer {
	extracted, ok := reward.Extract(response, opt)
	a := Answer{
		NoAnswer: !ok,
		Strict:   reward.StrictScore(response, gold),
		Robust:   ok && reward.RobustEquiv(extracted, gold),
		Boxed:    strings.Contains(response, `\boxed`),
	}
	if ok {
		a.Key = reward.Key(extracted)
	}
	return a
}

// ProblemRecord holds every graded sample of one problem.
type ProblemRecord struct {
	Dataset string `json:"dataset"`
	ID      string `json:"id"`
	// Answers[agent][turn][k] is trajectory k's answer of that agent at that turn; every
	// agent and turn has the same K, and trajectory k continues trajectory k.
	Answers [][][]Answer `json:"answers"`
}

// shape returns the record's numbers of agents and turns, or an error naming what is
// missing or ragged.
func (p ProblemRecord) shape() (agents, turns int, err error) {
	if p.Dataset == "" {
		return 0, 0, errors.New("no dataset name")
	}
	agents = len(p.Answers)
	if agents == 0 {
		return 0, 0, errors.New("no agents")
	}
	turns = len(p.Answers[0])
	if turns == 0 {
		return 0, 0, errors.New("no turns")
	}
	k := len(p.Answers[0][0])
	if k == 0 {
		return 0, 0, errors.New("no samples")
	}
	for a, byTurn := range p.Answers {
		if len(byTurn) != turns {
			return 0, 0, fmt.Errorf("agent %d has %d turns, agent 0 has %d", a, len(byTurn), turns)
		}
		for t, samples := range byTurn {
			if len(samples) != k {
				return 0, 0, fmt.Errorf("agent %d turn %d has %d samples, agent 0 turn 0 has %d", a, t, len(samples), k)
			}
		}
	}
	return agents, turns, nil
}

// category is one element of an answer support: an answer key, or no answer.
type category struct {
	none bool
	key  string
}

func categoryOf(s Answer) category {
	if s.NoAnswer {
		return category{none: true}
	}
	return category{key: s.Key}
}

// answerCounts maps each agent's samples at one turn to counts over their shared support
// (answer keys plus one "no answer" category), in order of first appearance.
func answerCounts(byAgent [][]Answer) [][]int {
	index := map[category]int{}
	ids := make([][]int, len(byAgent))
	for a, samples := range byAgent {
		ids[a] = make([]int, len(samples))
		for k, s := range samples {
			c := categoryOf(s)
			id, ok := index[c]
			if !ok {
				id = len(index)
				index[c] = id
			}
			ids[a][k] = id
		}
	}
	counts := make([][]int, len(byAgent))
	for a := range ids {
		counts[a] = make([]int, len(index))
		for _, id := range ids[a] {
			counts[a][id]++
		}
	}
	return counts
}

// fraction returns the share of samples for which ok holds.
func fraction(samples []Answer, ok func(Answer) bool) float64 {
	n := 0
	for _, s := range samples {
		if ok(s) {
			n++
		}
	}
	return float64(n) / float64(len(samples))
}

// ProblemTurn is the decomposition and accuracy of one problem at one turn.
type ProblemTurn struct {
	Dataset string `json:"dataset"`
	ID      string `json:"id"`
	Turn    int    `json:"turn"`
	Decomposition
	// Support is the number of distinct answers (no answer counts as one).
	Support int `json:"support"`
	// AccStrict[a] and AccRobust[a] are agent a's fraction of correct samples.
	AccStrict []float64 `json:"acc_strict"`
	AccRobust []float64 `json:"acc_robust"`
}

// PerProblem returns the decomposition and per-agent accuracy of a problem, turn by turn.
func PerProblem(p ProblemRecord) ([]ProblemTurn, error) {
	agents, turns, err := p.shape()
	if err != nil {
		return nil, fmt.Errorf("problem %s/%s: %w", p.Dataset, p.ID, err)
	}
	out := make([]ProblemTurn, turns)
	for t := range turns {
		byAgent := atTurn(p, t)
		counts := answerCounts(byAgent)
		d, err := Decompose(counts)
		if err != nil {
			return nil, fmt.Errorf("problem %s/%s turn %d: %w", p.Dataset, p.ID, t, err)
		}
		pt := ProblemTurn{Dataset: p.Dataset, ID: p.ID, Turn: t, Decomposition: d, Support: len(counts[0]),
			AccStrict: make([]float64, agents), AccRobust: make([]float64, agents)}
		for a, samples := range byAgent {
			pt.AccStrict[a] = fraction(samples, isStrict)
			pt.AccRobust[a] = fraction(samples, isRobust)
		}
		out[t] = pt
	}
	return out, nil
}

// atTurn returns every agent's samples at turn t.
func atTurn(p ProblemRecord, t int) [][]Answer {
	byAgent := make([][]Answer, len(p.Answers))
	for a := range p.Answers {
		byAgent[a] = p.Answers[a][t]
	}
	return byAgent
}

func isStrict(s Answer) bool { return s.Strict }
func isRobust(s Answer) bool { return s.Robust }
