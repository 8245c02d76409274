package trainer

// Data parallelism over several processes (Live.Group, a c10d process group). Every rank
// holds every agent's whole model and optimizer state (replicated), or with
// Config.Placement.Shard 1 the AdamW moments of its part of the parameters only (ZeRO stage
// 1), with Shard 2 also only its part of the summed gradients (stage 2), with Shard 3 only
// its part of the weights too, gathered while a pass uses them (stage 3); and its own
// rollout engines. A step's problems are split into contiguous shares, so whole GRPO groups
// stay on one rank and advantages need nothing from the others; each rank rolls out, scores
// and back-propagates its share, and the gradients are summed over the ranks before every
// optimizer step (inside the passes at stages 2-3). The loss of a mini-batch is already a
// mean over its groups (each group's loss counts 1/groups), so the sum over ranks is the
// one-process gradient. What the metrics are computed from is gathered in rank order, which
// is the one-process order, so rank 0 logs what one process would. Rank 0 writes the run
// directory (metrics, kept rollouts, checkpoints); rank r > 0 writes only its own GGUFs
// under RUN/ranks/r/.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/safetensors"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

// RanksDir holds what ranks other than 0 write in a run directory.
const RanksDir = "ranks"

func (t *Trainer) rank() int {
	if t.live.Group == nil {
		return 0
	}
	return t.live.Group.Rank()
}

func (t *Trainer) world() int {
	if t.live.Group == nil {
		return 1
	}
	return t.live.Group.World()
}

// lead reports whether this process writes the run directory (rank 0, or the only one).
func (t *Trainer) lead() bool { return t.rank() == 0 }

// rankDir is where this rank keeps its own files: the run directory for rank 0.
func (t *Trainer) rankDir() string {
	if t.lead() {
		return t.cfg.Out
	}
	return filepath.Join(t.cfg.Out, RanksDir, strconv.Itoa(t.rank()))
}

// share is rank's contiguous part [lo, hi) of n items split over world ranks.
func share(n, rank, world int) (lo, hi int) {
	return n * rank / world, n * (rank + 1) / world
}

// checkDist refuses what a multi-process run over g cannot do.
func (c *Config) checkDist(g *torch.Group) error {
	if g == nil { // a dry run plans agent groups without one; Run refuses them
		return nil
	}
	if err := c.Placement.CheckShard(c.LoRA.Rank); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if c.Placement.AgentRanks != nil {
		if err := trainspec.CheckAgentRanks(c.Placement.AgentRanks, len(c.Agents), g.World()); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	return c.CheckWorld(g.World())
}

// CheckWorld refuses what a run over w processes cannot do (a launcher checks before it
// starts them).
func (c *Settings) CheckWorld(w int) error {
	switch {
	case c.DynamicSampling:
		return errors.New("train: --dynamic-sampling is not supported with several processes yet (the refills pick problems across the whole batch)")
	case c.Overlap == 1 && w > 1:
		return errors.New("train: --overlap 1 is not supported with several processes yet (the rollout's collectives would interleave with the update's)")
	case c.BatchSize < w:
		return fmt.Errorf("train: a batch of %d problems cannot be split over %d processes", c.BatchSize, w)
	}
	return nil
}

// reduce combines v over the ranks in place (nothing to do in one process).
func (t *Trainer) reduce(v []float64, op torch.ReduceOp) error { return reduceOn(t.live.Group, v, op) }

// reduceOn combines v over g's ranks in place (nothing to do without a group).
func reduceOn(g *torch.Group, v []float64, op torch.ReduceOp) error {
	if g == nil {
		return nil
	}
	return g.AllReduce(v, op)
}

// stopRequested reports whether the run should stop before the next step: in one process
// when ctx ended, with several when it ended on any rank, so that all stop at the same step.
func (t *Trainer) stopRequested(ctx context.Context) (bool, error) {
	v := []float64{0}
	if ctx.Err() != nil {
		v[0] = 1
	}
	if err := t.reduce(v, torch.Max); err != nil {
		return false, err
	}
	return v[0] != 0, nil
}

// stepContext is the context a step runs under: with several processes a step is never
// cut short on one rank alone (the others would wait in a collective), so it runs to its
// end and stopRequested stops the run after it.
func (t *Trainer) stepContext(ctx context.Context) context.Context {
	if t.live.Group == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// gatherFixed returns every rank's items (fixed-size values) in rank order, and how many
// came from each rank.
func gatherFixed[T any](g *torch.Group, local []T) ([]T, []int, error) {
	if g == nil {
		return local, []int{len(local)}, nil
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, local); err != nil {
		return nil, nil, err
	}
	parts, err := g.AllGather(buf.Bytes())
	if err != nil {
		return nil, nil, err
	}
	var all []T
	counts := make([]int, len(parts))
	size := binary.Size(new(T))
	for r, p := range parts {
		if size <= 0 || len(p)%size != 0 {
			return nil, nil, fmt.Errorf("rank %d sent %d bytes, not whole items of %d", r, len(p), size)
		}
		items := make([]T, len(p)/size)
		if err := binary.Read(bytes.NewReader(p), binary.LittleEndian, items); err != nil {
			return nil, nil, fmt.Errorf("from rank %d: %w", r, err)
		}
		all, counts[r] = append(all, items...), len(items)
	}
	return all, counts, nil
}

// gatherJSON is gatherFixed for values that travel as JSON (records, verdicts).
func gatherJSON[T any](g *torch.Group, local []T) ([]T, error) {
	if g == nil {
		return local, nil
	}
	b, err := json.Marshal(local)
	if err != nil {
		return nil, err
	}
	parts, err := g.AllGather(b)
	if err != nil {
		return nil, err
	}
	var all []T
	for r, p := range parts {
		var items []T
		if err := json.Unmarshal(p, &items); err != nil {
			return nil, fmt.Errorf("from rank %d: %w", r, err)
		}
		all = append(all, items...)
	}
	return all, nil
}

// placeAgent makes every rank's agent i (actor weights and optimizer state, reference)
// rank 0's (its group's first rank's, with agent groups), so that a rank on another
// machine cannot silently start from other files. With
// --shard each rank holds its part of the actor's AdamW moments from the start (a resumed
// run's come from rank 0 by shareMoments); stage 2 then shards the gradients and stage 3
// the weights, the reference's too. Agent by agent, as open loads them: at most one
// agent's weights are whole at a time.
func (t *Trainer) placeAgent(i int, ck *checkpointInfo) error {
	g, a := t.group(i), t.agents[i]
	if g == nil {
		return nil
	}
	if err := g.BroadcastModel(a.actor.Model, 0); err != nil {
		return fmt.Errorf("agent %d: %w", i, err)
	}
	if err := t.shareMoments(i, ck); err != nil {
		return fmt.Errorf("agent %d: %w", i, err)
	}
	if a.ref != nil { // a LoRA actor's base is its reference
		if err := g.BroadcastModel(a.ref.Model, 0); err != nil {
			return fmt.Errorf("agent %d reference: %w", i, err)
		}
	}
	if !t.sharded(i) {
		return nil
	}
	if err := g.ShardOptimizer(a.actor.Model); err != nil {
		return fmt.Errorf("agent %d: %w", i, err)
	}
	if t.stage2(i) {
		if err := g.ShardGradients(a.actor.Model, trainspec.BucketBytes); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
	}
	if t.stage3(i) {
		if err := g.ShardWeights(a.actor.Model, trainspec.BucketBytes); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		if a.ref != nil {
			if err := g.ShardWeights(a.ref.Model, trainspec.BucketBytes); err != nil {
				return fmt.Errorf("agent %d reference: %w", i, err)
			}
		}
	}
	return nil
}

// shareMoments gives every rank its part of a resumed sharded run's AdamW moments of
// agent i, which only rank 0 read (ck is its checkpoint): rank 0 broadcasts them a tensor
// at a time and each rank keeps its part, so no rank holds them whole. A fresh run's are
// zeros everywhere.
func (t *Trainer) shareMoments(i int, ck *checkpointInfo) error {
	if !t.sharded(i) || t.step == 0 {
		return nil
	}
	g, m := t.group(i), t.agents[i].actor.Model
	var path string
	if ck != nil {
		path = filepath.Join(ck.agentDir(i), hfmodel.OptimizerFile)
	}
	// Rank 0 checks the whole file first, so that a bad one fails every rank at once; the
	// moments travel in the parameters' dtype.
	want := safetensors.F32
	if m.Options().DType == torch.Float64 {
		want = safetensors.F64
	}
	var problem []byte
	if t.leads(i) {
		err := hfmodel.EachMoment(m, path, func(_ torch.TensorInfo, _ torch.Kind, v safetensors.TensorView) error {
			if v.DType != want {
				return fmt.Errorf("%s: tensor %s is %s, want %s", path, v.Name, v.DType, want)
			}
			return nil
		})
		if err != nil {
			problem = []byte(err.Error())
		}
	}
	parts, err := g.AllGather(problem)
	if err != nil {
		return err
	}
	if len(parts[0]) > 0 {
		return fmt.Errorf("rank 0: %s", parts[0])
	}
	if t.leads(i) { // its own part is in place since it loaded the checkpoint
		return hfmodel.EachMoment(m, path, func(_ torch.TensorInfo, _ torch.Kind, v safetensors.TensorView) error {
			return g.Broadcast(bytes.Clone(v.Data), 0)
		})
	}
	infos, err := m.Tensors()
	if err != nil {
		return err
	}
	f64 := want == safetensors.F64
	for _, ti := range infos {
		if !m.Trainable(ti) {
			continue
		}
		n := 1
		for _, d := range ti.Shape {
			n *= int(d)
		}
		for _, kind := range hfmodel.Moments() {
			if f64 {
				buf := make([]float64, n)
				if err = g.Broadcast(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 8*n), 0); err == nil {
					err = torch.Write(m, ti.Name, kind, buf)
				}
			} else {
				buf := make([]float32, n)
				if err = g.Broadcast(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 4*n), 0); err == nil {
					err = torch.Write(m, ti.Name, kind, buf)
				}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// sharded reports whether agent i's AdamW moments are sharded over its ranks (ZeRO stage 1
// and up, Config.Placement.Shard).
func (t *Trainer) sharded(i int) bool { return t.group(i) != nil && t.cfg.Placement.Shard > 0 }

// stage2 reports whether agent i's gradients are sharded too: summed over its ranks inside
// the training passes, each rank keeping its part (ZeRO stage 2).
func (t *Trainer) stage2(i int) bool { return t.group(i) != nil && t.cfg.Placement.Shard >= 2 }

// stage3 reports whether its weights are sharded too, the actor's and the reference's:
// gathered a layer at a time while a pass uses them (ZeRO stage 3).
func (t *Trainer) stage3(i int) bool { return t.group(i) != nil && t.cfg.Placement.Shard >= 3 }

// holdWeights gathers agent i's actor whole on every rank for reads (a sync, a
// checkpoint) at stage 3; release ends it. Elsewhere both do nothing.
func (t *Trainer) holdWeights(i int) (release func() error, err error) {
	if !t.stage3(i) {
		return func() error { return nil }, nil
	}
	g, m := t.group(i), t.agents[i].actor.Model
	if err := g.HoldWeights(m); err != nil {
		return nil, fmt.Errorf("agent %d: %w", i, err)
	}
	return func() error { return g.ReleaseWeights(m) }, nil
}

// emptyForwards makes this rank's scoring passes of agent i's model m as many as the
// busiest rank's at stage 3, where every pass's gathers are collectives: done is this
// rank's count.
func (t *Trainer) emptyForwards(i int, m *torch.Model, done int) error {
	if !t.stage3(i) {
		return nil
	}
	most := []float64{float64(done)}
	if err := reduceOn(t.group(i), most, torch.Max); err != nil {
		return err
	}
	for range int(most[0]) - done {
		if err := t.group(i).EmptyForward(m); err != nil {
			return err
		}
	}
	return nil
}

// emptyPasses is how many passes without data this rank adds to its local ones in a
// mini-batch of agent i: at stage 2 the gradient sums are collectives inside the passes, so
// every rank runs as many as the busiest; with none anywhere, skip is true.
func (t *Trainer) emptyPasses(i, local int) (extra int, skip bool, err error) {
	if !t.stage2(i) {
		return 0, false, nil
	}
	most := []float64{float64(local)}
	if err := reduceOn(t.group(i), most, torch.Max); err != nil {
		return 0, false, err
	}
	return int(most[0]) - local, most[0] == 0, nil
}

// checkPlacement checks that every rank runs the same --shard and --agent-ranks, which
// are not part of the configuration the ranks compare (a run resumes under any placement).
func (t *Trainer) checkPlacement() error {
	if t.live.Group == nil {
		return nil
	}
	if err := t.live.Group.Agree("--shard", []byte{byte(t.cfg.Placement.Shard)}); err != nil {
		return err
	}
	return t.live.Group.Agree("--agent-ranks", fmt.Append(nil, t.cfg.Placement.AgentRanks))
}

// gatherParams completes a sharded optimizer step, in which each rank updated its part of
// the weights: every rank gets the others' parts. A skipped step (a norm that is not
// finite, on every rank alike, since the gradients were summed) changed nothing.
func (t *Trainer) gatherParams(i int, m *torch.Model, skipped bool) error {
	if !t.sharded(i) || t.stage3(i) || skipped { // stage 3 gathers the parts when it uses them
		return nil
	}
	return t.group(i).AllGatherParams(m, trainspec.BucketBytes)
}

// gatherOptimizer brings agent i's sharded moments whole to its first rank, which writes
// them in a checkpoint as one process would, then drops them with releaseOptimizer.
func (t *Trainer) gatherOptimizer(i int) error {
	if !t.sharded(i) {
		return nil
	}
	if err := t.group(i).GatherOptimizer(t.agents[i].actor.Model, 0); err != nil {
		return fmt.Errorf("agent %d: %w", i, err)
	}
	return nil
}

func (t *Trainer) releaseOptimizer(i int) error {
	if !t.sharded(i) {
		return nil
	}
	return t.group(i).ShardOptimizer(t.agents[i].actor.Model)
}

// reduceRolloutStats makes a step's rollout statistics the whole job's: counts summed, the
// time the slowest rank's.
func (t *Trainer) reduceRolloutStats(g *gathered) error {
	if t.live.Group == nil {
		return nil
	}
	s := &g.stats
	sums := []float64{float64(s.Problems), float64(s.SkippedOverlong), float64(s.Generations), float64(s.Carried),
		float64(s.Trimmed), float64(s.GeneratedTokens)}
	if err := t.reduce(sums, torch.Sum); err != nil {
		return err
	}
	s.Problems, s.SkippedOverlong, s.Generations, s.Carried, s.Trimmed = int(sums[0]), int(sums[1]), int(sums[2]), int(sums[3]), int(sums[4])
	s.GeneratedTokens = int64(sums[5])
	took := []float64{g.took.Seconds()}
	if err := t.reduce(took, torch.Max); err != nil {
		return err
	}
	g.took = time.Duration(took[0] * float64(time.Second))
	return nil
}

// reduceGrads sums a mini-batch's gradients of agent i over its ranks and returns how many
// groups had a loss on all ranks together; with none, no rank takes an optimizer step.
// local is this rank's count.
func (t *Trainer) reduceGrads(i int, m *torch.Model, local int) (int, error) {
	g := t.group(i)
	if g == nil {
		return local, nil
	}
	if t.stage2(i) { // summed inside the passes; emptyPasses skipped a mini-batch no rank had
		return 1, nil
	}
	n := []float64{float64(local)}
	if err := reduceOn(g, n, torch.Sum); err != nil {
		return 0, err
	}
	if n[0] == 0 {
		return 0, nil
	}
	return int(n[0]), g.AllReduceGrads(m, trainspec.BucketBytes)
}

// lossRow is one group's loss statistics; MiniBatch is the first group of its mini-batch.
type lossRow struct {
	MiniBatch                              int64
	ClipFrac, ClipFracLower, PGLoss, PPOKL float64
}

// lossMetrics averages the groups' loss statistics over agent i's ranks, in the step's order.
func (t *Trainer) lossMetrics(i int, local []lossRow, m *trainlog.StepMetrics) error {
	rows, _, err := gatherFixed(t.group(i), local)
	if err != nil {
		return fmt.Errorf("gather loss metrics: %w", err)
	}
	// One process sums them mini-batch by mini-batch; each rank sent its own groups of all
	// of them, so a stable sort by mini-batch restores the one-process order.
	slices.SortStableFunc(rows, func(a, b lossRow) int { return cmp.Compare(a.MiniBatch, b.MiniBatch) })
	var clip, clipLow, pg, ppoKL float64
	for _, r := range rows {
		clip, clipLow, pg, ppoKL = clip+r.ClipFrac, clipLow+r.ClipFracLower, pg+r.PGLoss, ppoKL+r.PPOKL
	}
	m.Groups = len(rows)
	if m.Groups > 0 {
		n := float64(m.Groups)
		m.ClipFrac, m.ClipFracLower, m.PGLoss, m.PPOKL = clip/n, clipLow/n, pg/n, ppoKL/n
	}
	return nil
}

// comm is the time this process spent in agent i's collectives so far, and the bytes it
// handed them.
func (t *Trainer) comm(i int) (time.Duration, int64) {
	g := t.group(i)
	if g == nil {
		return 0, 0
	}
	d, n, err := g.CommTotals()
	if err != nil {
		return g.CommTime, g.CommBytes
	}
	return d, n
}
