package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/disttest"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/trainspec"
)

// observed is what a run computed: every step's metrics rows (rewards, advantages) and
// the gradients of step 1's first optimizer step.
type observed struct {
	Rows  map[string][]sampleRow
	Grads map[string][]float32
}

// distConfig is a short grpo run whose first mini-batch straddles the two ranks (groups
// 0-2 on rank 0, 3-5 on rank 1; mini-batches of 4), every problem's debate
// kept on disk.
// distCase is a data-parallel run to compare with one process: its ranks, LoRA or not
// (rank-4 adapters on a bf16 base, no dropout: its masks follow each process's count of
// training passes), steps, groups per mini-batch and ZeRO stage; with AgentRanks, a umad
// debate of two agents, each trained on its group of ranks.
type distCase struct {
	World, Steps, MiniBatch int
	LoRA, Checkpoint, BF16  bool
	Shard                   int
	AgentRanks              [][]int
}

// exact reports whether the ranks' gradient sums are one process's, bit for bit. One
// rank's are; two ranks' contiguous shares are too (a + b is the one-process sum's last
// addition), except at stage 2, which sums each pass over the ranks: a mini-batch in which
// a rank has several groups and the other some too adds them in another order.
func (tc distCase) exact() bool {
	n := tc.World
	if tc.AgentRanks != nil {
		n = 0
		for _, g := range tc.AgentRanks {
			n = max(n, len(g))
		}
	}
	return n == 1 || n == 2 && (tc.Shard < 2 || tc.MiniBatch <= 2)
}

// observesGrads reports whether rank 0 sees agent 0's summed gradients, as one process
// does: not at stage 2, where a rank holds its part of the sums (the weights tell), nor
// when agent groups train agent 0 elsewhere.
func (tc distCase) observesGrads() bool {
	return tc.Shard < 2 && (tc.AgentRanks == nil || tc.AgentRanks[0][0] == 0)
}

func distConfig(t *testing.T, start string, tc distCase) Config {
	algo, starts := "grpo", []string{start}
	if tc.AgentRanks != nil { // a debate of two agents
		algo, starts = "umad", append(starts, start)
	}
	cfg := demoConfig(t, algo, starts, tc.Steps)
	cfg.BatchSize, cfg.MiniBatch, cfg.KeepRollouts = 6, tc.MiniBatch, 6
	cfg.ValProblems, cfg.ValEvery = cfg.ValProblems[:6], 0
	cfg.Placement.GradCheckpoint = tc.Checkpoint
	if tc.BF16 { // the probe compares bf16 compute with llama.cpp's f32 (bf16_test.go)
		cfg.DType, cfg.ProbeTol = trainspec.PrecisionBF16, 5e-2
	}
	if tc.LoRA {
		cfg.Opt.LR = 5e-3
		cfg.LoRA = trainspec.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}, BaseBF16: true}
	}
	return cfg
}

// observe installs hooks that fill o.
func observe(t *testing.T, cfg *Config, o *observed) {
	o.Rows, o.Grads = map[string][]sampleRow{}, map[string][]float32{}
	cfg.hooks = &testHooks{
		rows: func(step, turn, agent int, rows []sampleRow) {
			o.Rows[fmt.Sprintf("step %d turn %d agent %d", step, turn, agent)] = append([]sampleRow(nil), rows...)
		},
		grads: func(step, agent int, m *torch.Model) error {
			if step != 1 || len(o.Grads) > 0 {
				return nil
			}
			var err error
			o.Grads, err = readAll(m, torch.Grad)
			return err
		},
	}
}

// readAll reads every tensor's weights or gradients.
func readAll(m *torch.Model, kind torch.Kind) (map[string][]float32, error) {
	infos, err := m.Tensors()
	if err != nil {
		return nil, err
	}
	out := map[string][]float32{}
	for _, ti := range infos {
		n := int64(1)
		for _, d := range ti.Shape {
			n *= d
		}
		out[ti.Name] = make([]float32, n)
		if err := torch.Read(m, ti.Name, kind, out[ti.Name]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Two Gloo ranks on this machine against one process: the same rollouts, rewards and
// advantages, gradients to 1e-6 and weights after 3 steps to 1e-5 relative, the same metrics.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2") // a fresh model is never right: no advantages, no gradients
	// Two ranks: groups 0-2 and 3-5, mini-batches of 4 straddle them. Three ranks: shares
	// of 2 groups in one mini-batch, whose sum is then associated differently from one
	// process's: (g0+g1)+(g2+g3)+(g4+g5); one step, since weights that differ in the last
	// bits may sample another token later.
	// --shard 1: each rank updates its part of the weights from its part of the moments,
	// which changes no arithmetic (three ranks: the tolerance of their sum's association).
	// --shard 2 sums each pass's gradients over the ranks inside the backward (a layer at a
	// time when checkpointed) and each rank keeps its part: mini-batches of 2 groups, in
	// which no two ranks both have groups after a rank's first, give one process's sums;
	// one mini-batch of 6 associates them differently (one step, within the tolerance).
	// --shard 3 keeps each rank's part of the weights (the reference's too, in bf16 under
	// --dtype bf16), gathered a layer at a time by every pass: the same arithmetic as stage 2.
	for _, tc := range []distCase{{World: 2, Steps: 3, MiniBatch: 4}, {World: 2, Steps: 3, MiniBatch: 4, LoRA: true},
		{World: 3, Steps: 1, MiniBatch: 6}, {World: 2, Steps: 3, MiniBatch: 4, Shard: 1}, {World: 2, Steps: 3, MiniBatch: 4, LoRA: true, Shard: 1},
		{World: 3, Steps: 1, MiniBatch: 6, Shard: 1}, {World: 2, Steps: 3, MiniBatch: 2, Shard: 2},
		{World: 2, Steps: 3, MiniBatch: 2, Shard: 2, Checkpoint: true}, {World: 2, Steps: 3, MiniBatch: 2, LoRA: true, Shard: 2, Checkpoint: true},
		{World: 2, Steps: 1, MiniBatch: 6, Shard: 2, Checkpoint: true}, {World: 2, Steps: 3, MiniBatch: 2, Shard: 3, Checkpoint: true},
		{World: 2, Steps: 3, MiniBatch: 2, Shard: 3, Checkpoint: true, BF16: true},
		{World: 2, Steps: 3, MiniBatch: 4, AgentRanks: [][]int{{0}, {1}}},
		{World: 3, Steps: 3, MiniBatch: 2, Shard: 2, Checkpoint: true, AgentRanks: [][]int{{0, 1}, {2}}},
		{World: 2, Steps: 2, MiniBatch: 4, LoRA: true, AgentRanks: [][]int{{1}, {0}}}} {
		t.Run(fmt.Sprintf("ranks=%d,lora=%v,shard=%d,mb=%d,ckpt=%v,bf16=%v,agents=%v", tc.World, tc.LoRA, tc.Shard, tc.MiniBatch, tc.Checkpoint, tc.BF16, tc.AgentRanks), func(t *testing.T) { matchOneProcess(t, rt, start, tc) })
	}
}

// runRanks runs tc over tc.World Gloo ranks (TestDataParallelRank) into out; rank 0 writes
// what it observed to dump, when given.
func runRanks(t *testing.T, start, out, dump string, tc distCase) {
	t.Helper()
	spec, err := json.Marshal(tc)
	if err != nil {
		t.Fatal(err)
	}
	for r, res := range disttest.Spawn(t, "TestDataParallelRank", tc.World, 5*time.Minute, "UMAD_TEST_START="+start,
		"UMAD_TEST_OUT="+out, "UMAD_TEST_DUMP="+dump, "UMAD_TEST_CASE="+string(spec)) {
		if res.Err != nil || !strings.Contains(res.Output, "--- PASS: TestDataParallelRank") {
			t.Errorf("rank %d: %v\n%s", r, res.Err, res.Output) // every rank's: the first to fail may not be rank 0
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// sameCheckpoint reports which of the agents' weights and optimizer state differ, byte for
// byte, between two runs' checkpoints of step.
func sameCheckpoint(t *testing.T, a, b string, step int) []string {
	t.Helper()
	var differ []string
	ckpt := func(run string) string {
		return filepath.Join(run, CheckpointsDir, fmt.Sprintf("%s%06d", stepPrefix, step))
	}
	agents, err := filepath.Glob(filepath.Join(ckpt(a), "agent-*"))
	if err != nil || len(agents) == 0 {
		t.Fatalf("no agents in %s: %v", ckpt(a), err)
	}
	for i := range agents {
		for _, f := range []string{"model.safetensors", hfmodel.OptimizerFile} {
			if !sameBytes(t, filepath.Join(AgentCheckpointDir(ckpt(a), i), f), filepath.Join(AgentCheckpointDir(ckpt(b), i), f)) {
				differ = append(differ, fmt.Sprintf("agent %d's %s", i, f))
			}
		}
	}
	return differ
}

// A run resumes across --shard and the number of processes: 2 ranks at stage 3 for 2
// steps, then one process for the third; one process for 2 steps, then 2 ranks at stage 1
// for the third. Both end with the checkpoint of one process's 3 steps, byte for byte: the
// sharded checkpoint holds the whole moments, and a sharded resume takes its part of them.
func TestShardedResume(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	tc := distCase{World: 2, Steps: 3, MiniBatch: 2, Shard: 3, Checkpoint: true} // exact()
	whole := distConfig(t, start, tc)
	if err := Run(context.Background(), whole, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	two := tc
	two.Steps = 2
	sharded := t.TempDir()
	runRanks(t, start, sharded, "", two)
	one := distConfig(t, start, tc)
	one.Out = sharded
	if err := Run(context.Background(), one, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	if d := sameCheckpoint(t, whole.Out, sharded, 3); len(d) > 0 {
		t.Errorf("2 ranks at stage 3, then one process: %v differ from one process's", d)
	}

	first := distConfig(t, start, two)
	if err := Run(context.Background(), first, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	stage1 := tc
	stage1.Shard = 1
	runRanks(t, start, first.Out, "", stage1)
	if d := sameCheckpoint(t, whole.Out, first.Out, 3); len(d) > 0 {
		t.Errorf("one process, then 2 ranks at stage 1: %v differ from one process's", d)
	}
}

// Agent groups resume across placements: one process for 2 steps, then 3 ranks with
// agent 1 on ranks 1-2 (its moments sharded between them, taken from the checkpoint rank 1
// reads) for the third; and those 3 ranks for 2 steps, then one process. Both end with the
// checkpoint of one process's 3 steps, byte for byte.
func TestAgentGroupsResume(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	tc := distCase{World: 3, Steps: 3, MiniBatch: 2, Shard: 1, AgentRanks: [][]int{{0}, {1, 2}}} // exact()
	whole := distConfig(t, start, tc)
	if err := Run(context.Background(), whole, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	two := tc
	two.Steps = 2
	first := distConfig(t, start, two)
	if err := Run(context.Background(), first, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	runRanks(t, start, first.Out, "", tc)
	if d := sameCheckpoint(t, whole.Out, first.Out, 3); len(d) > 0 {
		t.Errorf("one process, then agent groups: %v differ from one process's", d)
	}
	grouped := t.TempDir()
	runRanks(t, start, grouped, "", two)
	one := distConfig(t, start, tc)
	one.Out = grouped
	if err := Run(context.Background(), one, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	if d := sameCheckpoint(t, whole.Out, grouped, 3); len(d) > 0 {
		t.Errorf("agent groups, then one process: %v differ from one process's", d)
	}
}

// With agent groups each group's first rank writes its agent into rank 0's checkpoints:
// one that does not see rank 0's run directory (a node without the shared filesystem)
// stops every rank at the start, with a message that says so.
func TestAgentGroupsNeedSharedRunDir(t *testing.T) {
	rt := torchtest.Open(t)
	start := warmStart(t, rt, "qwen2")
	spec, err := json.Marshal(distCase{World: 2, Steps: 1, MiniBatch: 4, AgentRanks: [][]int{{0}, {1}}})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for r, res := range disttest.Spawn(t, "TestDataParallelRank", 2, 5*time.Minute, "UMAD_TEST_START="+start,
		"UMAD_TEST_OUT="+out, "UMAD_TEST_CASE="+string(spec), "UMAD_TEST_OUT_PER_RANK=1") {
		const want = "rank 1 leads agent 1 but does not see rank 0's run directory"
		if res.Err == nil || !strings.Contains(res.Output, want) {
			t.Errorf("rank %d: %v, want the error %q:\n%s", r, res.Err, want, res.Output)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "rank-0", CheckpointsDir)); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote checkpoints (%v)", err)
	}
}

func matchOneProcess(t *testing.T, rt *torch.Runtime, start string, tc distCase) {
	lora := tc.LoRA
	one := distConfig(t, start, tc)
	var want observed
	observe(t, &one, &want)
	if err := Run(context.Background(), one, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	out, dump := t.TempDir(), filepath.Join(t.TempDir(), "observed.json")
	runRanks(t, start, out, dump, tc)
	var got observed
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}

	// Step 1 starts from the same weights: its rollouts and rewards must be identical.
	for step := 1; step <= tc.Steps; step++ {
		name := fmt.Sprintf("%s%06d.jsonl.zst", stepPrefix, step)
		a, b := keptDebates(t, filepath.Join(one.Out, RolloutsDir, name)), keptDebates(t, filepath.Join(out, RolloutsDir, name))
		if len(a) != 6 || len(b) != 6 {
			t.Fatalf("step %d kept %d and %d debates, want 6", step, len(a), len(b))
		}
		for p := range a {
			for k, x := range a[p].Turns[0][0] {
				y := b[p].Turns[0][0][k]
				if fmt.Sprint(x.Tokens) != fmt.Sprint(y.Tokens) {
					t.Errorf("step %d problem %d trajectory %d: tokens differ:\n%v\n%v", step, p, k, x.Tokens, y.Tokens)
				}
			}
		}
	}
	if len(want.Rows) != tc.Steps*one.Turns*len(one.Agents) {
		t.Fatalf("observed %d updates", len(want.Rows))
	}
	// The comparison of gradients and weights sees the last rank's share only if its
	// groups carry a learning signal somewhere.
	signal := false
	for _, rows := range want.Rows {
		lo, _ := share(6, tc.World-1, tc.World)
		for i := lo * 8; i < len(rows); i++ {
			signal = signal || rows[i].Advantage != 0
		}
	}
	if !signal {
		t.Fatal("no group of the last rank has a non-zero advantage: the test cannot see its gradients")
	}
	compared := 0
	for key, rows := range want.Rows {
		if _, ok := got.Rows[key]; !ok && tc.AgentRanks != nil {
			continue // trained on another group of ranks than rank 0's: its metrics lines tell
		}
		compared++
		if len(rows) != len(got.Rows[key]) {
			t.Fatalf("%s: %d responses, one process %d", key, len(got.Rows[key]), len(rows))
		}
		// After step 1 the weights differ in the last bits (the gradient sums' order), which
		// moves the trainer's log-probs; the rollout log-probs carry llama.cpp's
		// batch-dependent rounding (a rank batches fewer sequences) from the start.
		tol := 0.0
		if !strings.HasPrefix(key, "step 1 ") {
			tol = 1e-5
		}
		for i, x := range rows {
			y := got.Rows[key][i]
			if x.Correct != y.Correct || x.Advantage != y.Advantage || x.Weight != y.Weight || x.Team != y.Team ||
				x.Influence != y.Influence || x.Score != y.Score || x.Tokens != y.Tokens || x.Dropped != y.Dropped {
				t.Errorf("%s response %d: rewards or advantages differ:\n%+v\n%+v", key, i, x, y)
			}
			for _, v := range [][2]float64{{x.KLSum, y.KLSum}, {x.NLL, y.NLL}, {x.Entropy, y.Entropy}} {
				if !(math.Abs(v[0]-v[1]) <= tol*math.Max(1, math.Abs(v[0]))) {
					t.Errorf("%s response %d: trainer log-prob statistics differ:\n%+v\n%+v", key, i, x, y)
				}
			}
			if !(math.Abs(x.Gap-y.Gap) <= 1e-5) {
				t.Errorf("%s response %d: rollout log-probs differ by more than llama.cpp's rounding:\n%+v\n%+v", key, i, x, y)
			}
		}
	}
	if compared == 0 {
		t.Fatal("rank 0 observed no agent's rows")
	}
	var worst float64
	if tc.observesGrads() {
		worst = relGap(want.Grads, got.Grads)
		if !(worst <= 1e-6) {
			t.Errorf("step 1's summed gradients differ from one process's by %.3g relative", worst)
		}
		t.Logf("gradients of step 1: %.3g relative to one process's", worst)
	}
	agentDir := func(run string, i int) string {
		return AgentCheckpointDir(filepath.Join(run, CheckpointsDir, fmt.Sprintf("%s%06d", stepPrefix, tc.Steps)), i)
	}
	if lora { // a PEFT directory; two ranks' sums are exact (distNoise), so are the adapters
		for i := range max(1, len(tc.AgentRanks)) {
			for _, f := range []string{"adapter_model.safetensors", hfmodel.OptimizerFile} {
				if tc.exact() && !sameBytes(t, filepath.Join(agentDir(one.Out, i), f), filepath.Join(agentDir(out, i), f)) {
					t.Errorf("agent %d's %s after %d steps differs from one process's", i, f, tc.Steps)
				}
			}
		}
	} else {
		final := func(run string) map[string][]float32 {
			m, err := hfmodel.Load(rt, agentDir(run, 0), torch.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			w, err := readAll(m.Model, torch.Weight)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		// The whole model to 1e-5 relative, and every weight to 1e-5 absolute, 300 times below
		// a step's size (lr 3e-3). Not per tensor: a gradient that is zero in exact arithmetic
		// (attention's k bias: softmax ignores a shift shared by all keys) is pure round-off,
		// which AdamW divides by its own size into steps of up to lr; another association
		// of the sum (three ranks) moves those by a few 1e-6.
		a, b := final(one.Out), final(out)
		var num, den, most float64
		for name, x := range a {
			for i, v := range x {
				d := float64(v) - float64(b[name][i])
				num, den, most = num+d*d, den+float64(v)*float64(v), math.Max(most, math.Abs(d))
			}
		}
		if worst = math.Sqrt(num / den); !(worst <= 1e-5) || !(most <= 1e-5) {
			t.Errorf("weights after %d steps differ from one process's by %.3g relative, %.3g at most", tc.Steps, worst, most)
		}
		t.Logf("weights after %d steps: %.3g relative to one process's, %.3g at most", tc.Steps, worst, most)
		// Two ranks' sums are one process's (distNoise): so are the weights and the AdamW
		// moments, sharded or not, byte for byte.
		if d := sameCheckpoint(t, one.Out, out, tc.Steps); tc.exact() && len(d) > 0 {
			t.Errorf("after %d steps, %v differ from one process's", tc.Steps, d)
		}
	}
	a, av := readMetrics(t, one.Out)
	b2, bv := readMetrics(t, out)
	if len(a) != len(b2) || len(av) != len(bv) {
		t.Fatalf("%d+%d metrics lines, one process %d+%d", len(b2), len(bv), len(a), len(av))
	}
	for i := range a {
		for _, d := range metricsDiff(t, a[i], b2[i], distNoise) {
			t.Errorf("step %d: %s", a[i].Step, d)
		}
	}
	for i := range av {
		for _, d := range metricsDiff(t, av[i], bv[i], distNoise) {
			t.Errorf("validation at step %d: %s", av[i].Step, d)
		}
	}
}

// keptDebates reads a step's kept debates.
func keptDebates(t *testing.T, path string) []debate.Record {
	t.Helper()
	var recs []debate.Record
	if _, err := rollouts.Read(path, func(line []byte) error {
		var r debate.Record
		recs = append(recs, r)
		return json.Unmarshal(line, &recs[len(recs)-1])
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// distNoise: the gradients are summed rank by rank, then over the ranks. With two ranks
// and contiguous shares that is the one-process order (a+b = b+a exactly), and the test
// sees exact equality; with three the sum is associated differently, which moves the
// gradient norm and the weights in their last float32 bits, and with them the probe's
// llama.cpp-vs-plugin gap after the sync (about 1e-7 itself).
var distNoise = map[string]float64{"grad_norm": 1e-6, "probe_gap": 1e-6}

// relGap is the largest relative L2 distance between two sets of tensors.
func relGap(a, b map[string][]float32) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return math.Inf(1)
	}
	var worst float64
	for name, x := range a {
		y := b[name]
		if len(x) != len(y) {
			return math.Inf(1)
		}
		var num, den float64
		for i := range x {
			num += (float64(x[i]) - float64(y[i])) * (float64(x[i]) - float64(y[i]))
			den += float64(x[i]) * float64(x[i])
		}
		if den > 0 {
			worst = math.Max(worst, math.Sqrt(num/den))
		}
	}
	return worst
}

// TestDataParallelRank is one rank of TestDataParallelMatchesOneProcess.
func TestDataParallelRank(t *testing.T) {
	disttest.Child(t)
	rt := torchtest.Open(t)
	rank, world, port := disttest.Rank(t)
	g, err := rt.JoinGroup(torch.GroupOptions{MasterAddr: "127.0.0.1", MasterPort: port, Rank: rank, World: world, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var tc distCase
	if err := json.Unmarshal([]byte(os.Getenv("UMAD_TEST_CASE")), &tc); err != nil {
		t.Fatal(err)
	}
	cfg := distConfig(t, os.Getenv("UMAD_TEST_START"), tc)
	cfg.Out, cfg.Placement.Shard, cfg.Placement.AgentRanks = os.Getenv("UMAD_TEST_OUT"), tc.Shard, tc.AgentRanks
	if os.Getenv("UMAD_TEST_OUT_PER_RANK") != "" { // as if each rank's machine had its own disk
		cfg.Out = filepath.Join(cfg.Out, fmt.Sprint("rank-", rank))
	}
	var o observed
	observe(t, &cfg, &o)
	if !tc.observesGrads() {
		cfg.hooks.grads = nil
	}
	if err := Run(context.Background(), cfg, Live{Torch: rt, Group: g}); err != nil {
		t.Fatal(err)
	}
	if rank == 0 && os.Getenv("UMAD_TEST_DUMP") != "" {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("UMAD_TEST_DUMP"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
