package trainer

// The rollout phase: which problems a step debates, the debates themselves through the
// agents' engines, and DAPO's dynamic sampling.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/rollouts"
)

// batch returns the problem indices of a step (1-based): each epoch is a permutation drawn
// from (seed, epoch), cut into whole batches (the remainder is dropped, as the reference's
// drop_last does).
func (c *Config) batch(step int) []int {
	perEpoch := len(c.Problems) / c.BatchSize
	epoch, pos := (step-1)/perEpoch, (step-1)%perEpoch
	order := rand.New(rand.NewPCG(c.Seed, uint64(epoch))).Perm(len(c.Problems))
	return order[pos*c.BatchSize : (pos+1)*c.BatchSize]
}

// refill returns the problems of dynamic sampling's extra rollout batch number attempt
// (1-based) of a step: drawn from (seed, step, attempt), so a resumed run draws the same.
func (c *Config) refill(step, attempt int) []data.Problem {
	rng := rand.New(rand.NewPCG(c.Seed^0x9e3779b97f4a7c15, uint64(step)<<16|uint64(attempt)))
	out := make([]data.Problem, c.BatchSize)
	for i, j := range rng.Perm(len(c.Problems))[:c.BatchSize] {
		out[i] = c.Problems[j]
	}
	return out
}

// stepSeed names the sampling randomness of one rollout batch (attempt 0 is the step's
// own batch, later ones dynamic sampling's refills) of one step of one agent.
func stepSeed(seed uint64, step, agent, attempt int) uint64 {
	h := fnv.New64a()
	if attempt == 0 {
		fmt.Fprintf(h, "umad-train/%d/%d/%d", seed, step, agent)
	} else {
		fmt.Fprintf(h, "umad-train/%d/%d/%d/%d", seed, step, agent, attempt)
	}
	return h.Sum64()
}

// gathered is a step's rollout: the debates to learn from and what producing them cost.
type gathered struct {
	recs  []debate.Record
	stats debate.Stats
	took  time.Duration
}

// gather debates the step's batch (refilled by dynamic sampling when it is on) and keeps a
// few of the debates on disk for inspection.
func (t *Trainer) gather(ctx context.Context, step int) (gathered, error) {
	idx := t.cfg.batch(step)
	problems := make([]data.Problem, len(idx))
	for i, j := range idx {
		problems[i] = t.cfg.Problems[j]
	}
	// Each rank debates its share (dist.go).
	lo, hi := share(len(problems), t.rank(), t.world())
	start := time.Now()
	recs, stats, err := t.stepRollout(ctx, step, 0, problems[lo:hi])
	if err != nil {
		return gathered{}, err
	}
	if t.cfg.DynamicSampling {
		if recs, stats, err = t.fill(ctx, step, recs, stats); err != nil {
			return gathered{}, err
		}
	}
	g := gathered{recs: recs, stats: stats, took: time.Since(start)}
	if err := t.reduceRolloutStats(&g); err != nil {
		return g, fmt.Errorf("step %d: %w", step, err)
	}
	kept, err := gatherJSON(t.live.Group, recs[:min(t.cfg.KeepRollouts, len(recs))])
	if err != nil {
		return g, fmt.Errorf("step %d: keeping rollouts: %w", step, err)
	}
	if n := min(t.cfg.KeepRollouts, len(kept)); n > 0 && t.lead() {
		path := filepath.Join(t.cfg.Out, RolloutsDir, fmt.Sprintf("%s%06d.jsonl.zst", stepPrefix, step))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return g, err
		}
		if err := rollouts.WriteFile(path, kept[:n]); err != nil {
			return g, fmt.Errorf("step %d: keeping rollouts: %w", step, err)
		}
	}
	return g, nil
}

// debateConfig is the debate's view of the agents for one rollout or validation.
func (t *Trainer) debateConfig(turns, k int, seed func(agent int) uint64) debate.Config {
	dc := debate.Config{Turns: turns, K: k, PromptLimit: t.cfg.PromptLimit, Deterministic: t.cfg.Rollout.Deterministic,
		Prompt: t.cfg.debatePrompt(seed(0))}
	for i, a := range t.cfg.Agents {
		st := t.agents[i]
		dc.Agents = append(dc.Agents, debate.Agent{Name: a.Name, Generator: st.server.Engine, Format: st.format,
			Params: a.Params, MaxTokens: a.MaxTokens, Seed: seed(i)})
	}
	return dc
}

// debatePrompt is the debate messages' shape; seed draws Anonymise's labels.
func (c *Config) debatePrompt(seed uint64) debate.Prompt {
	p := debate.Prompt{KeepAnswers: c.NoMask, Anonymise: c.Anonymise, Seed: seed}
	if c.FullHistory {
		p.History = debate.HistoryFull
	}
	return p
}

// rollout debates the problems and returns their records in the given order.
func (t *Trainer) rollout(ctx context.Context, dc debate.Config, problems []data.Problem) ([]debate.Record, debate.Stats, error) {
	recs := make([]debate.Record, len(problems))
	stats, err := debate.Run(ctx, dc, problems, nil, func(r debate.Record) error {
		recs[r.Index] = r
		return nil
	})
	if err != nil {
		return nil, stats, err
	}
	if err := t.verify(ctx, recs); err != nil {
		return nil, stats, err
	}
	if stats.SkippedOverlong > 0 {
		// Keep only debated problems: a skipped one has no turns.
		kept := recs[:0]
		for _, r := range recs {
			if len(r.Turns) > 0 && r.Turns[0] != nil {
				kept = append(kept, r)
			}
		}
		recs = kept
	}
	if len(recs) == 0 {
		return nil, stats, errors.New("no problem could be debated: every prompt exceeds the prompt limit")
	}
	return recs, stats, nil
}

// stepRollout debates one rollout batch of a step.
func (t *Trainer) stepRollout(ctx context.Context, step, attempt int, problems []data.Problem) ([]debate.Record, debate.Stats, error) {
	dc := t.debateConfig(t.cfg.Turns, t.cfg.G, func(a int) uint64 { return stepSeed(t.cfg.Seed, step, a, attempt) })
	recs, stats, err := t.rollout(ctx, dc, problems)
	if err != nil {
		return nil, stats, fmt.Errorf("step %d rollout: %w", step, err)
	}
	return recs, stats, nil
}

// fill is dynamic sampling: it keeps the problems that have a learning signal for some
// agent and turn, and rolls out refill batches until BatchSize problems are kept or
// MaxGenBatches batches were rolled out. With none kept it returns the step's own batch,
// whose groups the update then drops.
func (t *Trainer) fill(ctx context.Context, step int, recs []debate.Record, stats debate.Stats) ([]debate.Record, debate.Stats, error) {
	var kept []debate.Record
	keep := func(rs []debate.Record) error {
		for _, r := range rs {
			ok, err := t.informative(r)
			if err != nil {
				return err
			}
			if ok && len(kept) < t.cfg.BatchSize {
				kept = append(kept, r)
			}
		}
		return nil
	}
	if err := keep(recs); err != nil {
		return nil, stats, err
	}
	for attempt := 1; len(kept) < t.cfg.BatchSize && attempt < t.cfg.MaxGenBatches; attempt++ {
		more, st, err := t.stepRollout(ctx, step, attempt, t.cfg.refill(step, attempt))
		if err != nil {
			return nil, stats, err
		}
		stats.GeneratedTokens += st.GeneratedTokens
		stats.Generations += st.Generations
		stats.Problems += st.Problems
		if err := keep(more); err != nil {
			return nil, stats, err
		}
	}
	if len(kept) == 0 {
		return recs, stats, nil
	}
	return kept, stats, nil
}

// informative reports whether some agent's group at some turn of a record has rewards
// that are not all equal (team reward plus influence, before the KL term).
func (t *Trainer) informative(r debate.Record) (bool, error) {
	c := correctness(r, t.cfg.Reward)
	for tt := range c {
		for a := range c[tt] {
			zero := make([]float64, len(c[tt][a]))
			g, err := t.cfg.Algo.GroupAdvantage(c, tt, a, zero, zero)
			if err != nil {
				return false, err
			}
			if g.RewardsVary() {
				return true, nil
			}
		}
	}
	return false, nil
}
