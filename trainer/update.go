package trainer

// The update phase: one agent's responses at one turn, their old and reference log-probs
// through the plugin, the loss inputs, and the PPO/GRPO optimizer steps.

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

// sampleRef locates one response: problem p (record index), trajectory k.
type sampleRef struct{ p, k int }

// turnBatch is every response of one agent at one turn of a step, grouped by problem: the
// G responses of one problem are contiguous, one GRPO group.
type turnBatch struct {
	refs               []sampleRef
	prompts, responses [][]int32
	rolloutLogp        [][]float32
	keptMass           [][]float32 // top-k/top-p kept mass per token; nil: nothing was cut
	overlong           []bool      // cut off at the token limit
	// Filled by the phases in turn: the actor's (old) and the reference's log-probs, the
	// actor's entropies, advantages per token, groups dropped by dynamic sampling, and the
	// optional loss mask and importance weights.
	old, ent, ref [][]float32
	adv           [][]float32
	dropped       []bool
	mask, isw     [][]float32
	// rows hold what the metrics are computed from, one per response; groups is the
	// step's number of groups over all ranks and first this rank's first one (dist.go).
	rows          []sampleRow
	groups, first int
}

// learn runs one agent's update phase for one turn.
func (t *Trainer) learn(step int, recs []debate.Record, correct [][][][]float64, turn, agent int) (m trainlog.StepMetrics, err error) {
	m = trainlog.StepMetrics{Kind: trainlog.KindTrain, Step: step, Agent: agent, Name: t.cfg.Agents[agent].Name, Turn: turn}
	comm, commBytes := t.comm(agent)
	defer func() {
		took, sent := t.comm(agent)
		m.Times.Comm, m.Times.CommBytes = (took - comm).Seconds(), sent-commBytes
	}()
	b, err := gatherTurn(recs, turn, agent)
	if err != nil {
		return m, err
	}
	if err := t.score(&b, agent, &m); err != nil {
		return m, err
	}
	if err := t.advantages(&b, correct, turn, agent, &m); err != nil {
		return m, err
	}
	rows, counts, err := gatherFixed(t.group(agent), b.rows)
	if err != nil {
		return m, fmt.Errorf("gather metrics: %w", err)
	}
	rowMetrics(rows, t.cfg.G, &m)
	if t.cfg.hooks != nil && t.cfg.hooks.rows != nil {
		t.cfg.hooks.rows(step, turn, agent, rows)
	}
	b.groups = len(rows) / t.cfg.G
	rank, _ := t.groupRank(agent)
	for r := 0; r < rank; r++ {
		b.first += counts[r] / t.cfg.G
	}
	t.lossInputs(&b, &m)
	if t.cfg.hooks != nil && t.cfg.hooks.batch != nil {
		t.cfg.hooks.batch(step, turn, agent, &b)
	}
	return m, t.update(&b, recs, step, agent, &m)
}

// gatherTurn collects agent's responses at turn from the records.
func gatherTurn(recs []debate.Record, turn, agent int) (turnBatch, error) {
	var b turnBatch
	for p, r := range recs {
		for k, at := range r.Turns[turn][agent] {
			if at.Carried {
				return b, errors.New("a carried turn reached the trainer (adaptive stopping is not for training)")
			}
			b.refs = append(b.refs, sampleRef{p, k})
			b.prompts, b.responses = append(b.prompts, at.PromptTokens), append(b.responses, at.Tokens)
			b.rolloutLogp = append(b.rolloutLogp, at.LogProbs)
			b.keptMass = append(b.keptMass, at.KeptMass)
			b.overlong = append(b.overlong, at.Finish == engine.FinishLength)
		}
	}
	return b, nil
}

// score computes the actor's (old) log-probs and entropies and the reference's log-probs
// at the sampling temperature.
func (t *Trainer) score(b *turnBatch, agent int, m *trainlog.StepMetrics) error {
	st, temp := t.agents[agent], t.cfg.Agents[agent].Params.Temperature
	t0 := time.Now()
	var err error
	var passes int
	if b.old, b.ent, passes, err = scoreAll(st.actor.LogProbs, b.prompts, b.responses, temp, t.cfg.G); err != nil {
		return fmt.Errorf("old log-probs: %w", err)
	}
	if err := t.emptyForwards(agent, st.actor.Model, passes); err != nil {
		return fmt.Errorf("old log-probs: %w", err)
	}
	m.Times.LogProbs = time.Since(t0).Seconds()
	t0 = time.Now()
	ref, refModel := st.actor.BaseLogProbs, st.actor.Model // LoRA: the base, adapters left out
	if st.ref != nil {
		ref, refModel = st.ref.LogProbs, st.ref.Model
	}
	if b.ref, _, passes, err = scoreAll(ref, b.prompts, b.responses, temp, t.cfg.G); err != nil {
		return fmt.Errorf("reference log-probs: %w", err)
	}
	if err := t.emptyForwards(agent, refModel, passes); err != nil {
		return fmt.Errorf("reference log-probs: %w", err)
	}
	m.Times.Reference = time.Since(t0).Seconds()
	return nil
}

// scorer is a model's LogProbs (or BaseLogProbs).
type scorer func(prompts, responses [][]int32, temp float64) (logp, ent [][]float32, err error)

// scoreAll computes log-probs and entropies in chunks of about chunk sequences, sending
// empty responses nowhere (they have nothing to score); passes is how many calls it made.
func scoreAll(score scorer, prompts, responses [][]int32, temp float64, chunk int) (logp, ent [][]float32, passes int, err error) {
	logp = make([][]float32, len(prompts))
	ent = make([][]float32, len(prompts))
	var idx []int
	flush := func() error {
		if len(idx) == 0 {
			return nil
		}
		var ps, rs [][]int32
		for _, i := range idx {
			ps, rs = append(ps, prompts[i]), append(rs, responses[i])
		}
		lp, en, err := score(ps, rs, temp)
		if err != nil {
			return err
		}
		passes++
		for j, i := range idx {
			logp[i], ent[i] = lp[j], en[j]
		}
		idx = idx[:0]
		return nil
	}
	for i := range prompts {
		if len(responses[i]) == 0 {
			logp[i], ent[i] = []float32{}, []float32{}
			continue
		}
		idx = append(idx, i)
		if len(idx) >= chunk {
			if err := flush(); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, 0, err
	}
	return logp, ent, passes, nil
}

// lossInputs builds the optional per-token inputs of the loss: the overlong filter's mask
// and truncated importance-sampling weights. The rollout drew each token from
// softmax(logits/T) renormalised over what top-k/top-p kept, so its probability was
// exp(rollout log-prob) / kept mass, and the weight is exp(trainer - rollout) x kept mass.
func (t *Trainer) lossInputs(b *turnBatch, m *trainlog.StepMetrics) {
	if t.cfg.OverlongFilter {
		b.mask = make([][]float32, len(b.refs))
		for i := range b.refs {
			b.mask[i] = make([]float32, len(b.responses[i]))
			if b.overlong[i] {
				m.Overlong++
				continue
			}
			for j := range b.mask[i] {
				b.mask[i][j] = 1
			}
		}
	}
	if t.cfg.TISCap > 0 {
		var all []float64
		b.isw = make([][]float32, len(b.refs))
		for i := range b.refs {
			b.isw[i] = make([]float32, len(b.old[i]))
			for j := range b.old[i] {
				w := math.Exp(float64(b.old[i][j]) - float64(b.rolloutLogp[i][j]))
				if b.keptMass[i] != nil {
					w *= float64(b.keptMass[i][j])
				}
				w = math.Min(w, t.cfg.TISCap)
				b.isw[i][j] = float32(w)
				all = append(all, w)
			}
		}
		m.ISWeight = summarise(all)
	}
}

// update is the PPO phase: mini-batches of whole groups, one micro-batch per group, an
// optimizer step per mini-batch.
func (t *Trainer) update(b *turnBatch, recs []debate.Record, step, agent int, m *trainlog.StepMetrics) error {
	st := t.agents[agent]
	t0 := time.Now()
	loss := trainspec.LossConfig{Loss: t.cfg.Loss, Temperature: t.cfg.Agents[agent].Params.Temperature, ClipLow: t.cfg.ClipLow, ClipHigh: t.cfg.ClipHigh,
		ClipC: t.cfg.ClipC, Agg: t.cfg.Agg, KL: trainspec.KLK3, KLCoef: t.cfg.Algo.KLLossCoef}
	opt := t.cfg.Opt
	opt.LR *= t.cfg.Schedule.Factor(step, t.cfg.Steps)
	m.LR = opt.LR
	// Mini-batches are cut from the step's groups over the agent's ranks; this rank computes
	// the losses of its own groups in each (b.first onwards) and the gradients are summed.
	local := len(b.refs) / t.cfg.G
	var losses []lossRow
	var norms float64
	var taken int // optimizer steps not skipped
	for g0 := 0; g0 < b.groups; g0 += t.cfg.MiniBatch {
		g1 := min(g0+t.cfg.MiniBatch, b.groups)
		var batches []torch.PolicyBatch
		var ids []string // each batch's problem, for errors
		for g := max(g0, b.first) - b.first; g < min(g1, b.first+local)-b.first; g++ {
			lo, hi := g*t.cfg.G, (g+1)*t.cfg.G
			pb := torch.PolicyBatch{Prompts: b.prompts[lo:hi], Responses: b.responses[lo:hi], OldLogp: b.old[lo:hi], Advantages: b.adv[lo:hi]}
			if b.mask != nil {
				pb.Mask = b.mask[lo:hi]
			}
			if b.dropped[g] || !needsLoss(pb, loss.KLCoef) {
				continue // no signal, or exactly zero gradient
			}
			if loss.KLCoef != 0 {
				pb.RefLogp = b.ref[lo:hi]
			}
			if b.isw != nil {
				pb.ISWeights = b.isw[lo:hi]
			}
			batches = append(batches, pb)
			ids = append(ids, recs[b.refs[lo].p].Problem.ID)
		}
		extra, skip, err := t.emptyPasses(agent, len(batches))
		if err != nil {
			return fmt.Errorf("mini-batch of groups %d-%d: %w", g0, g1-1, err)
		}
		if skip {
			continue
		}
		for bi, pb := range batches {
			// Each group's loss counts 1/(groups in the mini-batch), dropped ones included,
			// so a step's size does not depend on how many groups dynamic sampling kept.
			ls, err := st.actor.PolicyLoss(pb, loss, true, 1/float64(g1-g0))
			if err != nil {
				return err
			}
			if math.IsNaN(ls.Loss) || math.IsInf(ls.Loss, 0) {
				return fmt.Errorf("policy loss is %v on problem %s (lower the learning rate?)", ls.Loss, ids[bi])
			}
			losses = append(losses, lossRow{int64(g0), ls.ClipFrac, ls.ClipFracLower, ls.PGLoss, ls.PPOKL})
		}
		for range extra {
			if err := t.group(agent).ZeroPass(st.actor.Model); err != nil {
				return fmt.Errorf("mini-batch of groups %d-%d: %w", g0, g1-1, err)
			}
		}
		if n, err := t.reduceGrads(agent, st.actor.Model, len(batches)); err != nil || n == 0 {
			if err != nil {
				return fmt.Errorf("mini-batch of groups %d-%d: %w", g0, g1-1, err)
			}
			continue
		}
		if t.cfg.hooks != nil && t.cfg.hooks.grads != nil {
			if err := t.cfg.hooks.grads(step, agent, st.actor.Model); err != nil {
				return err
			}
		}
		s, err := st.actor.Step(opt)
		if err != nil {
			return err
		}
		if err := t.gatherParams(agent, st.actor.Model, s.Skipped); err != nil {
			return err
		}
		m.OptimSteps++
		if !s.Skipped { // a skipped step's norm is not finite: it is counted, not averaged
			norms += s.GradNorm
			taken++
		}
		m.SkippedSteps = s.SkippedTotal
	}
	if err := t.lossMetrics(agent, losses, m); err != nil {
		return err
	}
	if taken > 0 {
		m.GradNorm = norms / float64(taken)
	}
	if m.OptimSteps == 0 {
		if _, skipped, err := st.actor.OptimizerState(); err == nil {
			m.SkippedSteps = skipped
		}
	}
	m.Times.Update = time.Since(t0).Seconds()
	return nil
}

// needsLoss reports whether a group contributes a gradient: some unmasked token with a
// non-zero advantage, or unmasked tokens and a KL term.
func needsLoss(b torch.PolicyBatch, klCoef float64) bool {
	tokens := false
	for i, row := range b.Advantages {
		for j, v := range row {
			if b.Mask != nil && b.Mask[i][j] == 0 {
				continue
			}
			if v != 0 {
				return true
			}
			tokens = true
		}
	}
	return tokens && klCoef != 0
}
