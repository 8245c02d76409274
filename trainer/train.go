package trainer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/uncertainty"
)

// Agent is one trained debater.
type Agent struct {
	Name string `json:"name"`
	// Dir is the Hugging Face directory the agent starts from; it is also its frozen
	// reference model.
	Dir        string         `json:"dir"`
	Params     sampler.Params `json:"params"`
	MaxTokens  int            `json:"max_tokens"`
	SeedOffset uint64         `json:"seed_offset"`
}

// Config is a training run. Everything random derives from Seed and the step number, so
// a resumed run continues exactly as an uninterrupted one would.
type Config struct {
	Agents []Agent `json:"agents"`
	Algo   Algo    `json:"algo"`
	// Problems are the training set, ValProblems the held-out validation set.
	Problems    []data.Problem `json:"-"`
	ValProblems []data.Problem `json:"-"`
	Steps       int            `json:"steps"`      // optimisation steps in all
	BatchSize   int            `json:"batch_size"` // problems per step
	Turns       int            `json:"turns"`      // T_train
	G           int            `json:"g"`          // trajectories per problem
	// MiniBatch is the number of groups (problems) per optimizer step; the loss is the
	// mean over groups of each group's token-mean (reference section 4.3).
	MiniBatch   int           `json:"mini_batch"`
	Opt         torch.AdamW   `json:"optimizer"`
	ClipLow     float64       `json:"clip_low"`
	ClipHigh    float64       `json:"clip_high"`
	ClipC       float64       `json:"clip_c"`
	Agg         torch.AggMode `json:"loss_agg"`
	Robust      bool          `json:"robust"` // grade with the robust checker, not strict is_equiv
	PromptLimit int           `json:"prompt_limit"`
	Seed        uint64        `json:"seed"`
	ValEvery    int           `json:"val_every"`  // 0: before training and at the end only
	ValK        int           `json:"val_k"`      // trajectories per validation problem
	SaveEvery   int           `json:"save_every"` // 0: at the end only
	KeepLast    int           `json:"keep_last"`
	ProbeTol    float64       `json:"probe_tol"` // largest mean |delta| llama.cpp vs plugin; 0: no check
	// KeepRollouts is how many problems' training debates each step keeps in
	// RUN/rollouts/step-N.jsonl.zst, for inspection (0: none).
	KeepRollouts int `json:"keep_rollouts"`
	// Schedule is the learning rate's warm-up and decay over the steps.
	Schedule Schedule `json:"lr_schedule"`
	// DynamicSampling (DAPO) drops groups whose rewards are all equal (no learning signal)
	// and rolls out up to MaxGenBatches batches per step to fill BatchSize problems that
	// have at least one such group left.
	DynamicSampling bool `json:"dynamic_sampling"`
	MaxGenBatches   int  `json:"max_gen_batches"`
	// OverlongFilter masks responses cut off at the token limit out of the loss (DAPO),
	// instead of training them as wrong answers.
	OverlongFilter bool `json:"overlong_filter"`
	// TISCap > 0 weights each token's loss by min(exp(trainer - rollout log-prob), TISCap):
	// truncated importance sampling for the gap between llama.cpp and the trainer.
	TISCap    float64            `json:"tis_cap"`
	Engine    engine.Options     `json:"-"`
	GPULayers int                `json:"-"`
	Torch     torch.ModelOptions `json:"-"`
	// Format gives an agent's chat format from its loaded GGUF (a --chat-format override
	// or detection from the template).
	Format func(agent int, m *llama.Model) (chat.Format, error) `json:"-"`
	Out    string                                               `json:"-"`
	// Progress receives one human-readable line per step; nil is silent.
	Progress io.Writer `json:"-"`
}

// Check validates a configuration. Run calls it; the CLI calls it before it claims the
// run directory, so that a mistake leaves nothing behind.
func (c *Config) Check() error {
	switch {
	case len(c.Agents) == 0:
		return errors.New("train: no agents")
	case len(c.Problems) == 0:
		return errors.New("train: no training problems")
	case c.BatchSize < 1 || c.G < 1 || c.Turns < 1 || c.MiniBatch < 1:
		return fmt.Errorf("train: batch size %d, G %d, turns %d and mini-batch %d must be at least 1", c.BatchSize, c.G, c.Turns, c.MiniBatch)
	case len(c.Problems) < c.BatchSize:
		return fmt.Errorf("train: %d problems are fewer than one batch of %d", len(c.Problems), c.BatchSize)
	case c.Steps < 1:
		return fmt.Errorf("train: steps must be at least 1, got %d", c.Steps)
	case c.Format == nil || c.Out == "":
		return errors.New("train: a chat-format chooser and an output directory are required")
	case c.ValEvery < 0 || c.SaveEvery < 0 || c.KeepLast < 0 || c.ProbeTol < 0 || c.TISCap < 0 || c.KeepRollouts < 0:
		return errors.New("train: intervals, tolerances and caps must not be negative")
	case c.DynamicSampling && c.MaxGenBatches < 1:
		return fmt.Errorf("train: dynamic sampling needs at least 1 generation batch per step, got %d", c.MaxGenBatches)
	}
	if err := c.Schedule.check(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	for i, a := range c.Agents {
		if !(a.Params.Temperature > 0) {
			return fmt.Errorf("train: agent %d: training needs a positive sampling temperature (log-probs are taken at it)", i)
		}
		if a.MaxTokens < 1 {
			return fmt.Errorf("train: agent %d: max tokens must be at least 1", i)
		}
	}
	return c.Algo.Check(len(c.Agents), c.Turns)
}

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

// agentState is one agent's trainer and sampler.
type agentState struct {
	actor, ref *torch.Model
	server     *Server
	format     chat.Format
	probe      Pair
	gguf       string // the synced GGUF the server runs
}

// Trainer is a run in progress.
type Trainer struct {
	cfg     Config
	agents  []*agentState
	step    int // last completed step
	metrics *trainlog.Log
}

// ErrInterrupted is returned when the context ends a run; the last completed step is
// checkpointed first.
var ErrInterrupted = errors.New("training interrupted")

// Run trains until cfg.Steps, resuming from the newest complete checkpoint in cfg.Out. When
// ctx is cancelled it finishes the step being learned (a half-applied step cannot be
// resumed), checkpoints and returns ErrInterrupted.
func Run(ctx context.Context, rt *torch.Runtime, cfg Config) (err error) {
	if err := cfg.Check(); err != nil {
		return err
	}
	t := &Trainer{cfg: cfg}
	defer t.close()
	ck, err := latestCheckpoint(cfg.Out)
	if err != nil {
		return err
	}
	if ck != nil {
		t.step = ck.Step
		slog.Info("resuming", "step", ck.Step, "checkpoint", ck.Dir)
	}
	if err := t.open(rt, ck); err != nil {
		return err
	}
	if t.metrics, err = trainlog.Open(filepath.Join(cfg.Out, trainlog.File), t.step); err != nil {
		return err
	}
	if err := t.syncAll(); err != nil {
		return err
	}
	if t.step == 0 {
		if err := t.validate(ctx); err != nil {
			return t.stopped(ctx, err)
		}
	}
	saved := t.step
	for t.step < cfg.Steps {
		if ctx.Err() != nil {
			return t.interrupt(saved)
		}
		if err := t.trainStep(ctx); err != nil {
			if ctx.Err() != nil {
				return t.interrupt(saved)
			}
			return err
		}
		last := t.step == cfg.Steps
		if last || (cfg.ValEvery > 0 && t.step%cfg.ValEvery == 0) {
			if err := t.validate(ctx); err != nil {
				if ctx.Err() != nil {
					return t.interrupt(saved)
				}
				return err
			}
		}
		if last || (cfg.SaveEvery > 0 && t.step%cfg.SaveEvery == 0) {
			if err := t.checkpoint(); err != nil {
				return err
			}
			saved = t.step
		}
	}
	return nil
}

// stopped maps an error during an interrupted run to ErrInterrupted.
func (t *Trainer) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return err
}

func (t *Trainer) interrupt(saved int) error {
	if t.step > saved {
		if err := t.checkpoint(); err != nil {
			return errors.Join(ErrInterrupted, err)
		}
	}
	return ErrInterrupted
}

func (t *Trainer) close() {
	for _, a := range t.agents {
		a.server.Close()
		if a.actor != nil {
			a.actor.Free()
		}
		if a.ref != nil {
			a.ref.Free()
		}
	}
	if t.metrics != nil {
		t.metrics.Close()
	}
}

// open loads every agent's actor (from the checkpoint when resuming, optimizer state
// included) and its frozen reference (always the starting weights).
func (t *Trainer) open(rt *torch.Runtime, ck *checkpointInfo) error {
	actorOpts := t.cfg.Torch
	actorOpts.Trainable = true
	for i, a := range t.cfg.Agents {
		st := &agentState{gguf: filepath.Join(t.cfg.Out, "sync", fmt.Sprintf("agent-%d", i), "model.gguf")}
		t.agents = append(t.agents, st)
		dir := a.Dir
		if ck != nil {
			dir = ck.agentDir(i)
		}
		var err error
		if st.actor, err = rt.LoadHF(dir, actorOpts); err != nil {
			return fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		refOpts := t.cfg.Torch
		refOpts.Trainable = false
		if st.ref, err = rt.LoadHF(a.Dir, refOpts); err != nil {
			return fmt.Errorf("agent %d (%s) reference: %w", i, a.Name, err)
		}
	}
	return nil
}

// syncAll writes every agent's current weights for llama.cpp, reloads its engine and checks
// llama.cpp's log-probs of a fixed probe against the plugin's.
func (t *Trainer) syncAll() error {
	for i := range t.agents {
		if _, _, err := t.sync(i); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
	}
	return nil
}

// sync returns the time it took and the probe's mean |delta log-prob|.
func (t *Trainer) sync(i int) (time.Duration, float64, error) {
	start := time.Now()
	a, st := t.cfg.Agents[i], t.agents[i]
	staging := filepath.Join(filepath.Dir(st.gguf), "hf")
	if err := WriteGGUF(st.actor, a.Dir, staging, st.gguf); err != nil {
		return 0, 0, err
	}
	opt := t.cfg.Engine
	if opt.SeqContext == 0 {
		opt.SeqContext = t.cfg.PromptLimit + a.MaxTokens
	}
	srv, err := OpenServer(st.gguf, llama.ModelParams{GPULayers: t.cfg.GPULayers}, opt)
	if err != nil {
		return 0, 0, fmt.Errorf("sync: %w", err)
	}
	st.server.Close()
	st.server = srv
	if st.probe.Prompt == nil {
		if st.format, err = t.cfg.Format(i, srv.Model); err != nil {
			return 0, 0, err
		}
		if st.probe, err = t.makeProbe(srv.Model, st.format); err != nil {
			return 0, 0, err
		}
	}
	took := time.Since(start)
	gap, err := t.checkProbe(i)
	return took, gap, err
}

// makeProbe is a fixed prompt and response: the first training problem answered in the
// boxed format.
func (t *Trainer) makeProbe(m *llama.Model, f chat.Format) (Pair, error) {
	p := t.cfg.Problems[0]
	sp := m.Specials()
	end := sp.EOT
	if end < 0 {
		end = sp.EOS
	}
	pairs, err := TokenizePairs(m, f, end, []TextPair{{Prompt: engine.Turn0Message(p.Question), Response: AnswerResponse(p.Gold)}})
	if err != nil {
		return Pair{}, fmt.Errorf("probe: %w", err)
	}
	return pairs[0], nil
}

func (t *Trainer) checkProbe(i int) (float64, error) {
	st, a := t.agents[i], t.cfg.Agents[i]
	temp := a.Params.Temperature
	ll, err := LlamaLogProbs(st.server.Model, st.probe.Prompt, st.probe.Response, temp, t.cfg.Engine.Threads)
	if err != nil {
		return 0, fmt.Errorf("sync check: %w", err)
	}
	tl, _, err := st.actor.LogProbs([][]int32{st.probe.Prompt}, [][]int32{st.probe.Response}, temp)
	if err != nil {
		return 0, fmt.Errorf("sync check: %w", err)
	}
	gap := MeanAbsDiff(ll, tl[0])
	if math.IsNaN(gap) || math.IsInf(gap, 0) {
		// Checked even with the probe check off: diverged weights must not be checkpointed.
		return gap, fmt.Errorf("sync check: the probe's log-probs are %v: the weights diverged (lower the learning rate?)", gap)
	}
	if t.cfg.ProbeTol > 0 && !(gap <= t.cfg.ProbeTol) {
		return gap, fmt.Errorf("sync check: llama.cpp and the trainer disagree on the probe's log-probs by %.3g (mean |delta|), more than %.3g: the synced GGUF does not hold the trained weights", gap, t.cfg.ProbeTol)
	}
	return gap, nil
}

// debateConfig is the engine's view of the agents for one rollout or validation.
func (t *Trainer) debateConfig(turns, k int, seed func(agent int) uint64) engine.DebateConfig {
	dc := engine.DebateConfig{Turns: turns, K: k, PromptLimit: t.cfg.PromptLimit}
	for i, a := range t.cfg.Agents {
		st := t.agents[i]
		dc.Agents = append(dc.Agents, engine.DebateAgent{Name: a.Name, Generator: st.server.Engine, Format: st.format,
			Params: a.Params, MaxTokens: a.MaxTokens, Seed: seed(i)})
	}
	return dc
}

// rollout debates the problems and returns their records in the given order.
func (t *Trainer) rollout(ctx context.Context, dc engine.DebateConfig, problems []data.Problem) ([]engine.DebateRecord, engine.DebateStats, error) {
	recs := make([]engine.DebateRecord, len(problems))
	stats, err := engine.Debate(ctx, dc, problems, nil, func(r engine.DebateRecord) error {
		recs[r.Index] = r
		return nil
	})
	if err != nil {
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

// correct is a response's 0/1 reward in the run's grading mode.
func (t *Trainer) correct(at engine.AgentTurn) float64 {
	if (t.cfg.Robust && at.Grade.Robust) || (!t.cfg.Robust && at.Grade.Strict) {
		return 1
	}
	return 0
}

// correctness is c[t][a][k] of one record.
func (t *Trainer) correctness(r engine.DebateRecord) [][][]float64 {
	c := make([][][]float64, len(r.Turns))
	for tt, turn := range r.Turns {
		c[tt] = make([][]float64, len(turn))
		for a, byTraj := range turn {
			c[tt][a] = make([]float64, len(byTraj))
			for k, at := range byTraj {
				c[tt][a][k] = t.correct(at)
			}
		}
	}
	return c
}

// validate debates the held-out problems with the current weights and logs the accuracy
// of every agent at every turn.
func (t *Trainer) validate(ctx context.Context) error {
	if len(t.cfg.ValProblems) == 0 {
		return nil
	}
	start := time.Now()
	dc := t.debateConfig(t.cfg.Turns, max(t.cfg.ValK, 1), func(a int) uint64 { return t.cfg.Seed + t.cfg.Agents[a].SeedOffset })
	recs, _, err := t.rollout(ctx, dc, t.cfg.ValProblems)
	if err != nil {
		return fmt.Errorf("validation at step %d: %w", t.step, err)
	}
	acc := make([][]float64, len(t.cfg.Agents))
	for a := range acc {
		acc[a] = make([]float64, t.cfg.Turns)
	}
	var n float64
	for _, r := range recs {
		c := t.correctness(r)
		for tt := range c {
			for a := range c[tt] {
				for _, v := range c[tt][a] {
					acc[a][tt] += v
				}
			}
		}
		n += float64(len(r.Turns[0][0]))
	}
	for a := range acc {
		for tt := range acc[a] {
			acc[a][tt] /= n
		}
	}
	probs := make([]uncertainty.ProblemRecord, len(recs))
	for i, r := range recs {
		probs[i] = uncertainty.ProblemRecord{Dataset: r.Problem.Dataset, ID: r.Problem.ID, Answers: r.Verdicts()}
	}
	sum, err := uncertainty.Summarise(probs)
	if err != nil {
		return fmt.Errorf("validation at step %d: %w", t.step, err)
	}
	line := trainlog.ValMetrics{Kind: trainlog.KindVal, Step: t.step, Problems: len(recs), Accuracy: acc, Summary: &sum,
		Seconds: time.Since(start).Seconds()}
	if t.cfg.Progress != nil {
		fmt.Fprintf(t.cfg.Progress, "step %d validation: accuracy per agent and turn %v (%d problems)\n", t.step, roundAll(acc), len(recs))
	}
	return t.metrics.Append(line)
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

// trainStep runs one step: rollout, then for each turn and agent the old/reference
// log-probs, advantages and PPO updates, then the weight sync.
func (t *Trainer) trainStep(ctx context.Context) error {
	step := t.step + 1
	idx := t.cfg.batch(step)
	problems := make([]data.Problem, len(idx))
	for i, j := range idx {
		problems[i] = t.cfg.Problems[j]
	}
	start := time.Now()
	recs, stats, err := t.stepRollout(ctx, step, 0, problems)
	if err != nil {
		return err
	}
	if t.cfg.DynamicSampling {
		if recs, stats, err = t.fill(ctx, step, recs, stats); err != nil {
			return err
		}
	}
	rolloutTime := time.Since(start)
	if n := min(t.cfg.KeepRollouts, len(recs)); n > 0 {
		path := filepath.Join(t.cfg.Out, RolloutsDir, fmt.Sprintf("%s%06d.jsonl.zst", stepPrefix, step))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := rollouts.WriteFile(path, recs[:n]); err != nil {
			return fmt.Errorf("step %d: keeping rollouts: %w", step, err)
		}
	}
	correct := make([][][][]float64, len(recs))
	for p, r := range recs {
		correct[p] = t.correctness(r)
	}
	var lines []trainlog.StepMetrics
	for tt := 0; tt < t.cfg.Turns; tt++ {
		for a := range t.agents {
			m, err := t.learn(step, recs, correct, tt, a)
			if err != nil {
				return fmt.Errorf("step %d turn %d agent %d: %w", step, tt, a, err)
			}
			m.Times.Rollout = rolloutTime.Seconds()
			m.RolloutTokensPerSec = float64(stats.GeneratedTokens) / rolloutTime.Seconds()
			m.RolledOut = stats.Problems
			lines = append(lines, m)
		}
	}
	t.step = step
	var syncTime float64
	for a := range t.agents {
		took, gap, err := t.sync(a)
		if err != nil {
			return fmt.Errorf("step %d agent %d: %w", step, a, err)
		}
		syncTime += took.Seconds()
		for i := range lines {
			if lines[i].Agent == a {
				lines[i].Times.Sync = took.Seconds()
				lines[i].ProbeGap = gap
			}
		}
	}
	total := time.Since(start).Seconds()
	for i := range lines {
		lines[i].Times.Step = total
		if err := t.metrics.Append(lines[i]); err != nil {
			return err
		}
	}
	if t.cfg.Progress != nil {
		var acc, reward float64
		for _, l := range lines {
			acc += l.Accuracy / float64(len(lines))
			reward += l.Team / float64(len(lines))
		}
		fmt.Fprintf(t.cfg.Progress, "step %d/%d: accuracy %.3f, team reward %.3f, %d tokens, %.1fs (rollout %.1fs, sync %.2fs)\n",
			step, t.cfg.Steps, acc, reward, stats.GeneratedTokens, total, rolloutTime.Seconds(), syncTime)
	}
	return nil
}

// stepRollout debates one rollout batch of a step.
func (t *Trainer) stepRollout(ctx context.Context, step, attempt int, problems []data.Problem) ([]engine.DebateRecord, engine.DebateStats, error) {
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
// whose groups learn() then drops.
func (t *Trainer) fill(ctx context.Context, step int, recs []engine.DebateRecord, stats engine.DebateStats) ([]engine.DebateRecord, engine.DebateStats, error) {
	var kept []engine.DebateRecord
	keep := func(rs []engine.DebateRecord) error {
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
func (t *Trainer) informative(r engine.DebateRecord) (bool, error) {
	c := t.correctness(r)
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

// sampleRef locates one response: problem p (record index), trajectory k.
type sampleRef struct{ p, k int }

// learn runs one agent's update phase for one turn.
func (t *Trainer) learn(step int, recs []engine.DebateRecord, correct [][][][]float64, turn, agent int) (trainlog.StepMetrics, error) {
	st, a := t.agents[agent], t.cfg.Agents[agent]
	temp := a.Params.Temperature
	m := trainlog.StepMetrics{Kind: trainlog.KindTrain, Step: step, Agent: agent, Name: a.Name, Turn: turn}
	// Every response of this turn, grouped by problem.
	var refs []sampleRef
	var prompts, responses [][]int32
	var rolloutLogp [][]float32
	var overlong []bool
	for p, r := range recs {
		for k, at := range r.Turns[turn][agent] {
			if at.Carried {
				return m, errors.New("a carried turn reached the trainer (adaptive stopping is not for training)")
			}
			refs = append(refs, sampleRef{p, k})
			prompts, responses = append(prompts, at.PromptTokens), append(responses, at.Tokens)
			rolloutLogp = append(rolloutLogp, at.LogProbs)
			overlong = append(overlong, at.Finish == engine.FinishLength)
		}
	}
	t0 := time.Now()
	old, ent, err := scoreAll(st.actor, prompts, responses, temp, t.cfg.G)
	if err != nil {
		return m, fmt.Errorf("old log-probs: %w", err)
	}
	m.Times.LogProbs = time.Since(t0).Seconds()
	t0 = time.Now()
	ref, _, err := scoreAll(st.ref, prompts, responses, temp, t.cfg.G)
	if err != nil {
		return m, fmt.Errorf("reference log-probs: %w", err)
	}
	m.Times.Reference = time.Since(t0).Seconds()

	// Advantages, group by group (the G responses of one problem are contiguous).
	adv := make([][]float32, len(refs))
	dropped := make([]bool, len(refs)/t.cfg.G)
	var advAll, weights, team, infl, score, nlls []float64
	var klTok, entTok, gapTok, tokens float64
	for start := 0; start < len(refs); start += t.cfg.G {
		p := refs[start].p
		klSums := make([]float64, t.cfg.G)
		nll := make([]float64, t.cfg.G)
		for k := 0; k < t.cfg.G; k++ {
			i := start + k
			klSums[k] = KLSum(old[i], ref[i])
			nll[k] = MeanNLL(old[i])
			klTok += klSums[k]
			for j := range old[i] {
				entTok += float64(ent[i][j])
				gapTok += math.Abs(float64(old[i][j]) - float64(rolloutLogp[i][j]))
			}
			tokens += float64(len(old[i]))
		}
		g, err := t.cfg.Algo.GroupAdvantage(correct[p], turn, agent, klSums, nll)
		if err != nil {
			return m, err
		}
		if t.cfg.DynamicSampling && !g.RewardsVary() {
			dropped[start/t.cfg.G] = true
			m.DroppedGroups++
		}
		for k := 0; k < t.cfg.G; k++ {
			i := start + k
			adv[i] = make([]float32, len(responses[i]))
			for j := range adv[i] {
				adv[i][j] = float32(g.Advantages[k])
			}
			m.Accuracy += correct[p][turn][agent][k]
		}
		advAll = append(advAll, g.Advantages...)
		weights = append(weights, g.Weights...)
		team = append(team, g.Team...)
		infl = append(infl, g.Influence...)
		score = append(score, g.Scores...)
		nlls = append(nlls, nll...)
	}
	if n := float64(len(refs)); n > 0 {
		m.Accuracy /= n
	}
	m.Team, m.Influence, m.Score, m.NLL = meanOf(team), meanOf(infl), meanOf(score), meanOf(nlls)
	m.Advantage = summarise(advAll)
	m.Weight = summarise(weights)
	m.Tokens = int(tokens)
	if tokens > 0 {
		m.KL, m.Entropy, m.LogpGap = klTok/tokens, entTok/tokens, gapTok/tokens
	}
	var mask [][]float32
	if t.cfg.OverlongFilter {
		mask = make([][]float32, len(refs))
		for i := range refs {
			mask[i] = make([]float32, len(responses[i]))
			if overlong[i] {
				m.Overlong++
				continue
			}
			for j := range mask[i] {
				mask[i][j] = 1
			}
		}
	}
	var isw [][]float32
	if t.cfg.TISCap > 0 {
		var all []float64
		isw = make([][]float32, len(refs))
		for i := range refs {
			isw[i] = make([]float32, len(old[i]))
			for j := range old[i] {
				w := math.Min(math.Exp(float64(old[i][j])-float64(rolloutLogp[i][j])), t.cfg.TISCap)
				isw[i][j] = float32(w)
				all = append(all, w)
			}
		}
		m.ISWeight = summarise(all)
	}

	// PPO phase: mini-batches of whole groups, one micro-batch per group.
	t0 = time.Now()
	loss := torch.LossConfig{Temperature: temp, ClipLow: t.cfg.ClipLow, ClipHigh: t.cfg.ClipHigh, ClipC: t.cfg.ClipC,
		Agg: t.cfg.Agg, KL: torch.KLK3, KLCoef: t.cfg.Algo.KLLossCoef}
	opt := t.cfg.Opt
	opt.LR *= t.cfg.Schedule.Factor(step, t.cfg.Steps)
	m.LR = opt.LR
	groups := len(refs) / t.cfg.G
	var clip, clipLow, pg, ppoKL, norms float64
	for g0 := 0; g0 < groups; g0 += t.cfg.MiniBatch {
		g1 := min(g0+t.cfg.MiniBatch, groups)
		var batches []torch.PolicyBatch
		var ids []string // each batch's problem, for errors
		for g := g0; g < g1; g++ {
			lo, hi := g*t.cfg.G, (g+1)*t.cfg.G
			b := torch.PolicyBatch{Prompts: prompts[lo:hi], Responses: responses[lo:hi], OldLogp: old[lo:hi], Advantages: adv[lo:hi]}
			if mask != nil {
				b.Mask = mask[lo:hi]
			}
			if dropped[g] || !needsLoss(b, loss.KLCoef) {
				continue // no signal, or exactly zero gradient
			}
			if loss.KLCoef != 0 {
				b.RefLogp = ref[lo:hi]
			}
			if isw != nil {
				b.ISWeights = isw[lo:hi]
			}
			batches = append(batches, b)
			ids = append(ids, recs[refs[lo].p].Problem.ID)
		}
		for bi, b := range batches {
			// Each group's loss counts 1/(groups in the mini-batch), dropped ones included,
			// so a step's size does not depend on how many groups dynamic sampling kept.
			ls, err := st.actor.PolicyLoss(b, loss, true, 1/float64(g1-g0))
			if err != nil {
				return m, err
			}
			if math.IsNaN(ls.Loss) || math.IsInf(ls.Loss, 0) {
				return m, fmt.Errorf("policy loss is %v on problem %s (lower the learning rate?)", ls.Loss, ids[bi])
			}
			clip += ls.ClipFrac
			clipLow += ls.ClipFracLower
			pg += ls.PGLoss
			ppoKL += ls.PPOKL
			m.Groups++
		}
		if len(batches) == 0 {
			continue
		}
		s, err := st.actor.Step(opt)
		if err != nil {
			return m, err
		}
		m.OptimSteps++
		norms += s.GradNorm
		m.SkippedSteps = s.SkippedTotal
	}
	if m.Groups > 0 {
		n := float64(m.Groups)
		m.ClipFrac, m.ClipFracLower, m.PGLoss, m.PPOKL = clip/n, clipLow/n, pg/n, ppoKL/n
	}
	if m.OptimSteps > 0 {
		m.GradNorm = norms / float64(m.OptimSteps)
	} else if _, skipped, err := st.actor.OptimizerState(); err == nil {
		m.SkippedSteps = skipped
	}
	m.Times.Update = time.Since(t0).Seconds()
	return m, nil
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

// scoreAll computes log-probs and entropies in chunks of about chunk sequences, sending
// empty responses nowhere (they have nothing to score).
func scoreAll(m *torch.Model, prompts, responses [][]int32, temp float64, chunk int) ([][]float32, [][]float32, error) {
	logp := make([][]float32, len(prompts))
	ent := make([][]float32, len(prompts))
	var idx []int
	flush := func() error {
		if len(idx) == 0 {
			return nil
		}
		var ps, rs [][]int32
		for _, i := range idx {
			ps, rs = append(ps, prompts[i]), append(rs, responses[i])
		}
		lp, en, err := m.LogProbs(ps, rs, temp)
		if err != nil {
			return err
		}
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
				return nil, nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return logp, ent, nil
}

func summarise(v []float64) trainlog.Stats {
	if len(v) == 0 {
		return trainlog.Stats{}
	}
	s := trainlog.Stats{Mean: meanOf(v), Min: v[0], Max: v[0]}
	for _, x := range v {
		s.Std += (x - s.Mean) * (x - s.Mean)
		s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
	}
	s.Std = math.Sqrt(s.Std / float64(len(v)))
	return s
}

// sortedKeys is used by checkpoint pruning and tests.
func sortedKeys(m map[int]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
