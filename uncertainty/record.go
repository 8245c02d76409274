package uncertainty

import (
	"errors"
	"fmt"

	"github.com/umad-dev/umad/grade"
)

// ProblemRecord holds every graded sample of one problem.
type ProblemRecord struct {
	Dataset string `json:"dataset"`
	ID      string `json:"id"`
	// Answers[agent][turn][k] is trajectory k's answer of that agent at that turn; every
	// agent and turn has the same K, and trajectory k continues trajectory k.
	Answers [][][]grade.Verdict `json:"answers"`
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

func categoryOf(s grade.Verdict) category {
	if s.NoAnswer {
		return category{none: true}
	}
	return category{key: s.Key}
}

// answerCounts maps each agent's samples at one turn to counts over their shared support
// (answer keys plus one "no answer" category), in order of first appearance.
func answerCounts(byAgent [][]grade.Verdict) [][]int {
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
func fraction(samples []grade.Verdict, ok func(grade.Verdict) bool) float64 {
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
			pt.AccStrict[a] = fraction(samples, correctIn(grade.Strict))
			pt.AccRobust[a] = fraction(samples, correctIn(robustMode))
		}
		out[t] = pt
	}
	return out, nil
}

// TurnEU is the epistemic uncertainty of one turn's verdicts, byAgent[agent][k]: what the
// debate's EU stopping rule compares with its threshold (debate.Config.EU).
func TurnEU(byAgent [][]grade.Verdict) (float64, error) {
	d, err := Decompose(answerCounts(byAgent))
	return d.EU, err
}

// atTurn returns every agent's samples at turn t.
func atTurn(p ProblemRecord, t int) [][]grade.Verdict {
	byAgent := make([][]grade.Verdict, len(p.Answers))
	for a := range p.Answers {
		byAgent[a] = p.Answers[a][t]
	}
	return byAgent
}

// robustMode grades the robust figures: robust, and a verifier model's verdict on the pairs
// its rules do not decide where one was asked (debate --verifier, train's robust+verifier
// reward); without a verifier it is robust.
const robustMode = grade.Verified

// correctIn is the test of correctness in mode m, for fraction and flips.
func correctIn(m grade.Mode) func(grade.Verdict) bool {
	return func(v grade.Verdict) bool { return v.Correct(m) }
}
