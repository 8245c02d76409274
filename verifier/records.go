package verifier

import (
	"context"
	"time"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/grade"
)

// Records asks the verifier about every answer of the debate records that robust did not
// decide against its problem's gold answer, by the answer's Grade, and sets its
// Grade.Verifier. Answers robust decided, and responses without an answer, are left alone.
func (v *Verifier) Records(ctx context.Context, recs []debate.Record, budget time.Duration) (Counts, error) {
	var pairs []Pair
	var grades []*grade.Verdict
	for _, r := range recs {
		for _, turn := range r.Turns {
			for _, byTraj := range turn {
				for k := range byTraj {
					at := &byTraj[k]
					if at.Answer == nil || at.Grade.Decided(*at.Answer, r.Problem.Gold) {
						continue
					}
					pairs = append(pairs, Pair{Question: r.Problem.Question, Gold: r.Problem.Gold, Answer: *at.Answer})
					grades = append(grades, &at.Grade)
				}
			}
		}
	}
	checks, c, err := v.Check(ctx, pairs, budget)
	if err != nil {
		return c, err
	}
	for i, g := range grades {
		g.Verifier = checks[i]
	}
	return c, nil
}

// Tally counts the verifier's verdicts of one agent at one turn in the records,
// [turn][agent]: what the train metrics report.
func Tally(recs []debate.Record, turns, agents int) [][]Counts {
	out := make([][]Counts, turns)
	for t := range out {
		out[t] = make([]Counts, agents)
	}
	for _, r := range recs {
		for t, turn := range r.Turns {
			for a, byTraj := range turn {
				for _, at := range byTraj {
					if at.Grade.Verifier != "" && t < turns && a < agents {
						out[t][a].Pairs++
						out[t][a].count(at.Grade.Verifier)
					}
				}
			}
		}
	}
	return out
}
