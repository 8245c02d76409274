// Package trainer turns debate rollouts into gradient steps. A step goes through phases,
// each in its own file: the rollout (rollout.go), rewards (reward.go) and advantages
// (advantage.go), the update: log-probs, reference, loss inputs and optimizer steps
// (update.go), the weight sync back to llama.cpp (sync.go), validation (validate.go) and
// checkpoints (checkpoint.go); config.go holds the run's configuration and algo.go the
// algorithms. This file is the loop that drives them.
//
// The formulas follow spec/UMAD-reference.md section 3 (the authors' code) by default; the
// paper's variants are named options.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/trainlog"
)

// agentState is one agent's trainer and sampler.
type agentState struct {
	// ref is nil in a LoRA run: the actor's base is the reference.
	actor, ref *hfmodel.Model
	server     *engine.Server
	format     chat.Format
	probe      Pair
	gguf       string // the GGUF the server was loaded from: the current weights only with --sync file, the base in an adapter sync
	// With agent groups (groups.go): the process group of the agent's ranks when this rank
	// is one of several, and the one its leader sends the weights to the other ranks'
	// engines over (its root the leader) when this rank is one of those.
	group, serve *torch.Group
	serveRoot    int
}

// Trainer is a run in progress.
type Trainer struct {
	cfg     Config
	live    Live
	agents  []*agentState
	step    int // last completed step
	metrics *trainlog.Log
	// next is, with Overlap 1, the rollout of step step+1 (made from the weights before
	// step step's update); nil until it is rolled out.
	next *gathered
}

// ErrInterrupted is returned when the context ends a run; the last completed step is
// checkpointed first.
var ErrInterrupted = errors.New("training interrupted")

// Run trains until cfg.Steps with live's handles, resuming from the newest complete
// checkpoint in cfg.Out. When ctx is cancelled it finishes the step being learned (a
// half-applied step cannot be resumed), checkpoints and returns ErrInterrupted; if that
// checkpoint fails, the error says which step was not saved instead.
func Run(ctx context.Context, cfg Config, live Live) (err error) {
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := cfg.checkDist(live.Group); err != nil {
		return err
	}
	if cfg.Placement.AgentRanks != nil && live.Group == nil {
		return errors.New("train: --agent-ranks needs several processes")
	}
	if cfg.Verifier != "" && live.Checker == nil {
		return fmt.Errorf("train: the verifier %s is not loaded", cfg.Verifier)
	}
	rt := live.Torch
	t := &Trainer{cfg: cfg, live: live}
	defer t.close()
	var ck *checkpointInfo
	if t.lead() { // other ranks get rank 0's state by broadcast (dist.go)
		if ck, err = latestCheckpoint(cfg.Out); err != nil {
			return err
		}
	}
	if ck != nil {
		t.step = ck.Step
		slog.Info("resuming", "step", ck.Step, "checkpoint", ck.Dir)
	}
	resumed := []float64{float64(t.step)}
	if err := t.reduce(resumed, torch.Max); err != nil {
		return err
	}
	t.step = int(resumed[0])
	if err := t.checkPlacement(); err != nil {
		return err
	}
	if ck, err = t.shareRunDir(ck); err != nil {
		return err
	}
	if err := t.open(rt, ck); err != nil {
		return err
	}
	if t.lead() {
		if t.metrics, err = trainlog.Open(filepath.Join(cfg.Out, trainlog.File), t.step); err != nil {
			return err
		}
		defer t.page(false) // however the run ends, the page stops reloading
	}
	if err := t.syncAll(); err != nil {
		return err
	}
	if cfg.Overlap == 1 && ck != nil {
		if t.next, err = readNext(ck); err != nil {
			return err
		}
	}
	if t.step == 0 {
		if err := t.validate(t.stepContext(ctx)); err != nil {
			return t.stopped(ctx, err)
		}
	}
	saved := t.step
	for t.step < cfg.Steps {
		if stop, err := t.stopRequested(ctx); err != nil || stop {
			if err != nil {
				return err
			}
			return t.interrupt(saved)
		}
		train := t.trainStep
		if cfg.Overlap == 1 {
			train = t.overlapStep
		}
		if err := train(t.stepContext(ctx)); err != nil {
			if ctx.Err() != nil {
				return t.interrupt(saved)
			}
			return err
		}
		last := t.step == cfg.Steps
		if last || (cfg.ValEvery > 0 && t.step%cfg.ValEvery == 0) {
			if err := t.validate(t.stepContext(ctx)); err != nil {
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

// interrupt checkpoints the steps completed since the last checkpoint (saved) and returns
// ErrInterrupted; if that checkpoint fails, the error says what was not saved instead.
func (t *Trainer) interrupt(saved int) error {
	if t.step > saved {
		if err := t.checkpoint(); err != nil {
			return fmt.Errorf("interrupted, but step %d was not saved, so --resume continues after step %d: %w", t.step, saved, err)
		}
	}
	return ErrInterrupted
}

func (t *Trainer) close() {
	for _, a := range t.agents {
		a.closeGroups()
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
// included) and its frozen reference (always the starting weights), and gives every rank
// rank 0's (placeAgent), agent by agent. A LoRA actor's base is its reference: no second
// copy is loaded. With agent groups a rank loads only the agent it trains, and that
// agent's first rank reads the checkpoint.
func (t *Trainer) open(rt *torch.Runtime, ck *checkpointInfo) error {
	for i := range t.cfg.Agents {
		t.agents = append(t.agents, &agentState{gguf: filepath.Join(t.rankDir(), "sync", fmt.Sprintf("agent-%d", i), "model.gguf")})
	}
	if err := t.joinAgentGroups(); err != nil {
		return err
	}
	for i := range t.cfg.Agents {
		if !t.trains(i) {
			continue
		}
		from := ck
		if !t.leads(i) { // the others get its state from it (placeAgent)
			from = nil
		}
		if err := t.load(rt, from, i); err != nil {
			return err
		}
		if err := t.placeAgent(i, ck); err != nil {
			return err
		}
	}
	return nil
}

// load loads agent i (open).
func (t *Trainer) load(rt *torch.Runtime, ck *checkpointInfo, i int) error {
	a := t.cfg.Agents[i]
	base := torch.ModelOptions{Precision: t.cfg.DType}
	base.Device, base.GradCheckpoint = t.cfg.Placement.Device, t.cfg.Placement.GradCheckpoint
	actorOpts := base
	actorOpts.Trainable = true
	actorOpts.Offload = t.cfg.Placement.Offload
	if t.sharded(i) { // each rank holds (and reads from a checkpoint) its part of the moments alone
		actorOpts.MomentShard.Rank, actorOpts.MomentShard.World = t.groupRank(i)
	}
	if t.cfg.LoRA.Rank > 0 {
		actorOpts.LoRA = t.cfg.LoRA
		actorOpts.LoRA.Seed = t.cfg.Seed + uint64(i)
	}
	st := t.agents[i]
	dir := a.Dir
	if ck != nil {
		dir = ck.agentDir(i)
		// Without its AdamW moments a resumed run would quietly train another run.
		if _, err := os.Stat(filepath.Join(dir, hfmodel.OptimizerFile)); err != nil {
			return fmt.Errorf("resume: agent %d's checkpoint %s has no optimizer state: %w", i, dir, err)
		}
	}
	var err error
	if ck == nil && a.Adapter != "" {
		st.actor, err = hfmodel.LoadAdapter(rt, a.Adapter, a.Dir, actorOpts)
	} else {
		st.actor, err = hfmodel.Load(rt, dir, actorOpts)
	}
	if err != nil {
		return fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
	}
	if t.cfg.LoRA.Rank > 0 {
		return nil
	}
	if st.actor.Options().LoRA.Rank > 0 {
		return fmt.Errorf("agent %d (%s): %s is a LoRA adapter; train it with its --lora-rank, or start from a merged model (umad sft writes one to hf/)", i, a.Name, dir)
	}
	refOpts := base
	refOpts.Trainable = false
	if st.ref, err = hfmodel.Load(rt, a.Dir, refOpts); err != nil {
		return fmt.Errorf("agent %d (%s) reference: %w", i, a.Name, err)
	}
	return nil
}

// trainStep runs one step: the rollout, then for each turn and agent the update phase,
// then the weight sync, and logs a metrics line per turn and agent.
func (t *Trainer) trainStep(ctx context.Context) error {
	step := t.step + 1
	start := time.Now()
	g, err := t.gather(ctx, step)
	if err != nil {
		return err
	}
	lines, err := t.learnStep(step, g)
	if err != nil {
		return err
	}
	return t.finishStep(step, g, lines, start)
}

// learnStep runs the update phase of every turn and agent (with agent groups, of this
// rank's agent) on a step's rollout g and returns the step's metrics lines.
func (t *Trainer) learnStep(step int, g gathered) ([]trainlog.StepMetrics, error) {
	recs, err := t.groupRecords(g.recs)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	correct := make([][][][]float64, len(recs))
	for p, r := range recs {
		correct[p] = correctness(r, t.cfg.Reward)
	}
	var lines []trainlog.StepMetrics
	for tt := 0; tt < t.cfg.Turns; tt++ {
		for a := range t.agents {
			if !t.trains(a) {
				continue
			}
			m, err := t.learn(step, recs, correct, tt, a)
			if err != nil {
				return nil, fmt.Errorf("step %d turn %d agent %d: %w", step, tt, a, err)
			}
			lines = append(lines, m)
		}
	}
	if lines, err = t.groupLines(lines); err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	for i := range lines {
		lines[i].Times.Rollout = g.took.Seconds()
		lines[i].RolloutTokensPerSec = float64(g.stats.GeneratedTokens) / g.took.Seconds()
		lines[i].RolledOut = g.stats.Problems
	}
	if err := t.verifierMetrics(g.recs, lines); err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	return lines, nil
}

// finishStep counts a learned step, syncs the weights to llama.cpp and logs the step's
// metrics lines; start is when the step began.
func (t *Trainer) finishStep(step int, g gathered, lines []trainlog.StepMetrics, start time.Time) error {
	t.step = step
	// The training peak goes back to the GPU's driver, or on the CPU to the system, before
	// the sync and the next rollout (llama.cpp may share the device).
	t.live.Torch.ReleaseCache()
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
	if !t.lead() {
		return nil
	}
	for i := range lines {
		lines[i].Times.Step = total
		if err := t.metrics.Append(lines[i]); err != nil {
			return err
		}
	}
	t.page(true)
	if t.live.Progress != nil {
		var acc, reward float64
		for _, l := range lines {
			acc += l.Accuracy / float64(len(lines))
			reward += l.Team / float64(len(lines))
		}
		fmt.Fprintf(t.live.Progress, "step %d/%d: accuracy %.3f, team reward %.3f, %d tokens, %.1fs (rollout %.1fs, sync %.2fs)\n",
			step, t.cfg.Steps, acc, reward, g.stats.GeneratedTokens, total, g.took.Seconds(), syncTime)
	}
	return nil
}

// page rewrites the run's page (Live.Page) on the lead rank, now that the metrics log
// has grown or the run ends. A page that cannot be written is logged, not fatal: it is a
// view of the log, which is safe.
func (t *Trainer) page(live bool) {
	if t.live.Page == nil || !t.lead() {
		return
	}
	if err := t.live.Page(t.cfg.Out, live); err != nil {
		slog.Warn("training page not written", "err", err)
	}
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
