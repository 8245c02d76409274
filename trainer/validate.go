package trainer

// The validation phase: debates of the held-out problems with the current weights.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// validate debates the held-out problems with the current weights and logs the accuracy
// of every agent at every turn, with the debate summary `umad debate` reports.
func (t *Trainer) validate(ctx context.Context) error {
	if len(t.cfg.ValProblems) == 0 {
		return nil
	}
	start := time.Now()
	dc := t.debateConfig(t.cfg.valTurns(), max(t.cfg.ValK, 1), func(a int) uint64 { return t.cfg.Seed + t.cfg.Agents[a].SeedOffset })
	for a := range dc.Agents {
		dc.Agents[a].Params = t.cfg.valParams(a)
	}
	var mine []valRecord // this rank's share of the problems (dist.go)
	if lo, hi := share(len(t.cfg.ValProblems), t.rank(), t.world()); lo < hi {
		recs, _, err := t.rollout(ctx, dc, t.cfg.ValProblems[lo:hi])
		if err != nil {
			return fmt.Errorf("validation at step %d: %w", t.step, err)
		}
		for _, r := range recs {
			mine = append(mine, valRecord{Correct: correctness(r, t.cfg.Reward),
				Problem: uncertainty.ProblemRecord{Dataset: r.Problem.Dataset, ID: r.Problem.ID, Answers: r.Verdicts()}})
		}
	}
	recs, err := gatherJSON(t.live.Group, mine)
	if err != nil || !t.lead() {
		return err
	}
	acc := make([][]float64, len(t.cfg.Agents))
	for a := range acc {
		acc[a] = make([]float64, t.cfg.valTurns())
	}
	var n float64
	for _, r := range recs {
		c := r.Correct
		for tt := range c {
			for a := range c[tt] {
				for _, v := range c[tt][a] {
					acc[a][tt] += v
				}
			}
		}
		n += float64(len(c[0][0]))
	}
	for a := range acc {
		for tt := range acc[a] {
			acc[a][tt] /= n
		}
	}
	probs := make([]uncertainty.ProblemRecord, len(recs))
	for i, r := range recs {
		probs[i] = r.Problem
	}
	sum, err := uncertainty.Summarise(probs)
	if err != nil {
		return fmt.Errorf("validation at step %d: %w", t.step, err)
	}
	line := trainlog.ValMetrics{Kind: trainlog.KindVal, Step: t.step, Problems: len(recs), Accuracy: acc, Summary: &sum,
		Seconds: time.Since(start).Seconds()}
	if t.live.Progress != nil {
		fmt.Fprintf(t.live.Progress, "step %d validation: accuracy per agent and turn %v (%d problems)\n", t.step, roundAll(acc), len(recs))
	}
	if err := t.metrics.Append(line); err != nil {
		return err
	}
	t.page(true)
	return nil
}

// valTurns is the turns of a validation debate.
func (c *Config) valTurns() int {
	if c.ValTurns == 0 {
		return c.Turns
	}
	return c.ValTurns
}

// valParams is agent a's sampling in validation: its own, at the validation temperature
// when one is set.
func (c *Config) valParams(a int) sampler.Params {
	p := c.Agents[a].Params
	if c.ValTemperature != nil {
		p.Temperature = *c.ValTemperature
	}
	return p
}

func roundAll(v [][]float64) [][]float64 {
	out := make([][]float64, len(v))
	for i := range v {
		for _, x := range v[i] {
			out[i] = append(out[i], math.Round(x*1000)/1000)
		}
	}
	return out
}

// valRecord is what validation needs of one debated problem: correctness[turn][agent][k]
// and the verdicts.
type valRecord struct {
	Correct [][][]float64
	Problem uncertainty.ProblemRecord
}
