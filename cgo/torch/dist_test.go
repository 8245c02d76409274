package torch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/internal/disttest"
	"github.com/umad-dev/umad/trainspec"
)

// joinForTest joins the process group of a disttest rank.
func joinForTest(t *testing.T, rt *Runtime, timeout time.Duration) *Group {
	t.Helper()
	rank, world, port := disttest.Rank(t)
	g, err := rt.JoinGroup(GroupOptions{MasterAddr: "127.0.0.1", MasterPort: port, Rank: rank, World: world, Backend: Gloo, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func TestGroup(t *testing.T) {
	openForTest(t)
	for r, res := range disttest.Spawn(t, "TestGroupRank", 2, 2*time.Minute) {
		if res.Err != nil || !strings.Contains(res.Output, "--- PASS: TestGroupRank") {
			t.Errorf("rank %d: %v\n%s", r, res.Err, res.Output)
		}
	}
}

// TestGroupRank is one rank of TestGroup: reductions, gathers, the weights broadcast and
// the gradient all-reduce against the same gradients accumulated in one process.
func TestGroupRank(t *testing.T) {
	disttest.Child(t)
	rt := openForTest(t)
	g := joinForTest(t, rt, time.Minute)
	r := g.Rank()
	if err := g.Agree("config", []byte("same")); err != nil {
		t.Fatal(err)
	}
	v := []float64{float64(r + 1), 10 * float64(r)}
	if err := g.AllReduce(v, Sum); err != nil || v[0] != 3 || v[1] != 10 {
		t.Fatalf("sum: %v %v", v, err)
	}
	v = []float64{float64(r), -float64(r)}
	if err := g.AllReduce(v, Max); err != nil || v[0] != 1 || v[1] != 0 {
		t.Fatalf("max: %v %v", v, err)
	}
	mine := [][]byte{[]byte("rank zero"), nil}[r]
	parts, err := g.AllGather(mine)
	if err != nil || len(parts) != 2 || string(parts[0]) != "rank zero" || len(parts[1]) != 0 {
		t.Fatalf("gather: %q %v", parts, err)
	}

	cfg := tinyConfigs[0].cfg
	m := randomModel(t, rt, cfg, ModelOptions{Trainable: true}, uint64(10+r)) // different weights per rank
	if err := g.BroadcastModel(m, 0); err != nil {
		t.Fatal(err)
	}
	want := randomModel(t, rt, cfg, ModelOptions{Trainable: true}, 10) // rank 0's
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	read := func(m *Model, name string, kind Kind) []float32 {
		n := int64(1)
		for _, ti := range infos {
			if ti.Name == name {
				for _, d := range ti.Shape {
					n *= d
				}
			}
		}
		out := make([]float32, n)
		if err := Read(m, name, kind, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, ti := range infos {
		a, b := read(m, ti.Name, Weight), read(want, ti.Name, Weight)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s[%d] after broadcast: %v, rank 0 has %v", ti.Name, i, a[i], b[i])
			}
		}
	}

	// A LoRA model: its bf16 base travels as bytes, its adapters and their moments as they are.
	lopts := ModelOptions{Trainable: true, LoRA: trainspec.LoRA{Rank: 2, Alpha: 4, Targets: []string{"q", "down"}, Seed: uint64(r), BaseBF16: true}}
	lm := randomModel(t, rt, cfg, lopts, uint64(20+r))
	if err := g.BroadcastModel(lm, 0); err != nil {
		t.Fatal(err)
	}
	lopts.LoRA.Seed = 0
	lwant := randomModel(t, rt, cfg, lopts, 20)
	linfos, err := lm.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range linfos {
		a, b := make([]float32, numel(ti.Shape)), make([]float32, numel(ti.Shape))
		if err := Read(lm, ti.Name, Weight, a); err != nil {
			t.Fatal(err)
		}
		if err := Read(lwant, ti.Name, Weight, b); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("LoRA model's %s[%d] after broadcast: %v, rank 0 has %v", ti.Name, i, a[i], b[i])
			}
		}
	}

	// Each rank's gradient of its own batch, summed by the all-reduce, against both
	// batches accumulated on one model.
	batch := func(seed uint64) ([][]int32, [][]int32) {
		return randomSeqs(rand.New(rand.NewPCG(seed, 1)), cfg.VocabSize, 3)
	}
	p, q := batch(uint64(r))
	if _, err := m.SFTLoss(p, q, true, 0.5); err != nil {
		t.Fatal(err)
	}
	if err := g.AllReduceGrads(m, 4096); err != nil { // small buckets: several of them
		t.Fatal(err)
	}
	for s := uint64(0); s < 2; s++ {
		p, q := batch(s)
		if _, err := want.SFTLoss(p, q, true, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	var worst float64
	for _, ti := range infos {
		a, b := read(m, ti.Name, Grad), read(want, ti.Name, Grad)
		var num, den float64
		for i := range a {
			num += (float64(a[i]) - float64(b[i])) * (float64(a[i]) - float64(b[i]))
			den += float64(b[i]) * float64(b[i])
		}
		if den > 0 {
			worst = math.Max(worst, math.Sqrt(num/den))
		}
	}
	if worst > 1e-6 || g.CommBytes == 0 {
		t.Fatalf("all-reduced gradients differ from the one-process sum by %.3g relative (%d bytes sent)", worst, g.CommBytes)
	}
}

func TestGroupRefusesDifferentConfig(t *testing.T) {
	openForTest(t)
	res := disttest.Spawn(t, "TestGroupDifferentConfigRank", 2, 2*time.Minute)
	for r := range res {
		if !strings.Contains(res[r].Output, "rank 1's config differs from rank 0's") {
			t.Errorf("rank %d does not name the rank that differs:\n%s", r, res[r].Output)
		}
	}
}

func TestGroupDifferentConfigRank(t *testing.T) {
	disttest.Child(t)
	g := joinForTest(t, openForTest(t), time.Minute)
	if err := g.Agree("config", []byte{byte(g.Rank())}); err != nil {
		t.Fatal(err)
	}
}

// Subgroups (one agent per group of ranks): three ranks split into {0, 2} and {1}, each
// group's collectives over its own members while the job's group still works.
func TestSubgroups(t *testing.T) {
	openForTest(t)
	for r, res := range disttest.Spawn(t, "TestSubgroupsRank", 3, 2*time.Minute) {
		if res.Err != nil || !strings.Contains(res.Output, "--- PASS: TestSubgroupsRank") {
			t.Fatalf("rank %d: %v\n%s", r, res.Err, res.Output)
		}
	}
}

func TestSubgroupsRank(t *testing.T) {
	disttest.Child(t)
	g := joinForTest(t, openForTest(t), time.Minute)
	r := g.Rank()
	if _, err := g.Sub("other", []int{(r + 1) % 3}); err == nil || !strings.Contains(err.Error(), "not one of its ranks") {
		t.Fatalf("a subgroup without this rank: %v", err)
	}
	if _, err := g.Sub("unordered", []int{2, r}); r < 2 && (err == nil || !strings.Contains(err.Error(), "increasing")) {
		t.Fatalf("ranks out of order: %v", err)
	}
	ranks := [][]int{{0, 2}, {1}, {0, 2}}[r]
	s, err := g.Sub(fmt.Sprint("agent-", r%2), ranks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := []int{0, 0, 1}[r]; s.Rank() != want || s.World() != len(ranks) {
		t.Fatalf("rank %d is %d of %d in its subgroup, want %d of %d", r, s.Rank(), s.World(), want, len(ranks))
	}
	v := []float64{float64(r + 1)}
	if err := s.AllReduce(v, Sum); err != nil || v[0] != []float64{4, 2, 4}[r] {
		t.Fatalf("subgroup sum: %v %v", v, err)
	}
	b := []byte{byte(r), 0}
	if err := s.Broadcast(b, s.World()-1); err != nil || b[0] != []byte{2, 1, 2}[r] {
		t.Fatalf("subgroup broadcast: %v %v", b, err)
	}
	v = []float64{float64(r + 1)}
	if err := g.AllReduce(v, Sum); err != nil || v[0] != 6 {
		t.Fatalf("the job's sum after the subgroups': %v %v", v, err)
	}
}

// A rank that dies or never arrives must turn into an error on the others within the
// timeout, not a wait forever.
func TestGroupPeerFailure(t *testing.T) {
	openForTest(t)
	for _, mode := range []string{"exit", "hang"} {
		start := time.Now()
		res := disttest.Spawn(t, "TestGroupPeerFailureRank", 2, 2*time.Minute, "UMAD_TEST_PEER="+mode)
		if res[0].Err == nil || !strings.Contains(res[0].Output, "all-reduce") {
			t.Errorf("%s: rank 0 did not fail in its all-reduce: %v\n%s", mode, res[0].Err, res[0].Output)
		}
		if took := time.Since(start); took > time.Minute {
			t.Errorf("%s: took %v", mode, took)
		}
	}
}

func TestGroupPeerFailureRank(t *testing.T) {
	disttest.Child(t)
	g := joinForTest(t, openForTest(t), 3*time.Second)
	if g.Rank() == 1 {
		if os.Getenv("UMAD_TEST_PEER") == "exit" {
			os.Exit(3)
		}
		time.Sleep(5 * time.Second) // past rank 0's 3 s timeout
		return
	}
	if err := g.AllReduce([]float64{1}, Sum); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAllReduceGrads times the gradient all-reduce of two Gloo ranks on this machine
// at the Qwen2.5-0.5B shape with UMAD_BENCH_LAYERS of its 24 layers (default 2: the whole
// model's gradients, weights and AdamW state in two processes would not fit beside other
// jobs; UMAD_BENCH_BUCKET_MB sets the bucket, default 25); the bytes per step scale with the
// parameters, and the time with the bytes:
//
//	go test ./cgo/torch/ -run '^$' -bench AllReduceGrads -benchtime 1x
func BenchmarkAllReduceGrads(b *testing.B) {
	openForTest(b)
	for i := 0; i < b.N; i++ {
		res := disttest.Spawn(b, "TestAllReduceBenchRank", 2, 10*time.Minute, "UMAD_BENCH_ALLREDUCE=1")
		for r, x := range res {
			if x.Err != nil || !strings.Contains(x.Output, "--- PASS") {
				b.Fatalf("rank %d: %v\n%s", r, x.Err, x.Output)
			}
		}
		for _, line := range strings.Split(res[0].Output, "\n") {
			if strings.Contains(line, "all-reduce:") {
				b.Log(strings.TrimSpace(line))
			}
		}
	}
}

func TestAllReduceBenchRank(t *testing.T) {
	disttest.Child(t)
	if os.Getenv("UMAD_BENCH_ALLREDUCE") == "" {
		t.Skip("a rank of BenchmarkAllReduceGrads")
	}
	layers, bucket := 2, int64(25<<20)
	if v := os.Getenv("UMAD_BENCH_LAYERS"); v != "" {
		layers, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("UMAD_BENCH_BUCKET_MB"); v != "" {
		mb, _ := strconv.Atoi(v)
		bucket = int64(mb) << 20
	}
	rt := openForTest(t)
	g := joinForTest(t, rt, 5*time.Minute)
	// qwen2.5-0.5b (model/shape.go) with fewer layers.
	cfg := Config{VocabSize: 151936, HiddenSize: 896, IntermediateSize: 4864, NumLayers: layers,
		NumHeads: 14, NumKVHeads: 2, HeadDim: 64, RopeTheta: 1e6, RMSNormEps: 1e-6, TieEmbeddings: true, AttentionBias: true}
	m := randomModel(t, rt, cfg, ModelOptions{Trainable: true}, 1)
	p, q := benchBatch(cfg.VocabSize, 1, 8, 8)
	if _, err := m.SFTLoss(p, q, true, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.AllReduceGrads(m, bucket); err != nil { // warm-up: connections, buffers
		t.Fatal(err)
	}
	g.CommTime, g.CommBytes = 0, 0
	const reps = 3
	for i := 0; i < reps; i++ {
		if err := g.AllReduceGrads(m, bucket); err != nil {
			t.Fatal(err)
		}
	}
	sec := g.CommTime.Seconds() / reps
	bytes := float64(g.CommBytes) / reps
	t.Logf("all-reduce: %d layers, %d MB buckets, %.0f MB per all-reduce, %.3f s, %.2f GB/s of gradient per rank",
		layers, bucket>>20, bytes/1e6, sec, bytes/sec/1e9)
}

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// ZeRO stages 1-3 over 2 ranks against one process: 3 clipped AdamW steps on the same
// gradients, each rank updating its part and all-gathering the others', give bit-identical
// weights, and the moments gathered to rank 0 are bit-identical too. Stage 2 sums the
// ranks' passes inside the backward (checkpointed, a layer at a time), so one process runs
// the passes of both ranks: g + g is exact. Stage 3 also keeps each rank's part of the
// weights, gathered a layer at a time by the passes, and needs no all-gather after a step.
func TestShardedOptimizer(t *testing.T) {
	openForTest(t)
	for _, stage := range []string{"1", "2", "3"} {
		t.Run("stage="+stage, func(t *testing.T) {
			for r, res := range disttest.Spawn(t, "TestShardedOptimizerRank", 2, 2*time.Minute, "UMAD_TEST_STAGE="+stage) {
				if res.Err != nil || !strings.Contains(res.Output, "--- PASS: TestShardedOptimizerRank") {
					t.Errorf("rank %d: %v\n%s", r, res.Err, res.Output)
				}
			}
		})
	}
}

// TestShardedOptimizerRank is one rank of TestShardedOptimizer. The tied embedding of
// 20,000 x 32 = 640,000 values is most of the model, so the cut between the ranks falls
// inside it, at 2 x 2^18 (the optimizer's CPU slice), and rank 1 updates its tail and the
// layers.
func TestShardedOptimizerRank(t *testing.T) {
	disttest.Child(t)
	rt := openForTest(t)
	g := joinForTest(t, rt, time.Minute)
	cfg := tinyConfigs[0].cfg
	cfg.VocabSize = 20000
	stage, _ := strconv.Atoi(os.Getenv("UMAD_TEST_STAGE"))
	stage2 := stage >= 2
	opts := ModelOptions{Trainable: true, ModelPlacement: trainspec.ModelPlacement{GradCheckpoint: stage2}}
	m, want := randomModel(t, rt, cfg, opts, 10), randomModel(t, rt, cfg, opts, 10)
	if err := g.ShardOptimizer(m); err != nil {
		t.Fatal(err)
	}
	if stage2 {
		if err := g.ShardGradients(m, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if stage == 3 {
		if err := g.ShardWeights(m, 1<<16); err != nil { // 64 KiB: several rounds a layer
			t.Fatal(err)
		}
		if err := Read(m, "model.norm.weight", Weight, make([]float32, cfg.HiddenSize)); err == nil || !strings.Contains(err.Error(), "gather them whole") {
			t.Fatalf("reading a sharded weight: %v", err)
		}
	}
	opt := trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 0.5}
	for s := uint64(0); s < 3; s++ {
		p, q := randomSeqs(rand.New(rand.NewPCG(s, 1)), cfg.VocabSize, 3)
		pass := func(model *Model) {
			t.Helper()
			if _, err := model.SFTLoss(p, q, true, 1); err != nil {
				t.Fatal(err)
			}
		}
		if stage == 3 && s == 1 { // a scoring pass on rank 0, its gathers alone on rank 1
			if g.Rank() == 0 {
				a, _, err := m.LogProbs(p, q, 1)
				if err != nil {
					t.Fatal(err)
				}
				b, _, err := want.LogProbs(p, q, 1)
				if err != nil {
					t.Fatal(err)
				}
				for i := range a {
					if !slices.Equal(a[i], b[i]) {
						t.Fatalf("sequence %d: log-probs from gathered layers differ from one process's", i)
					}
				}
			} else if err := g.EmptyForward(m); err != nil {
				t.Fatal(err)
			}
		}
		pass(m)
		pass(want)
		if stage2 {
			pass(want) // the other rank's pass
			// The last step: rank 0 runs a second pass, rank 1 an empty one.
			if s == 2 {
				pass(want)
				if g.Rank() == 0 {
					pass(m)
				} else if err := g.ZeroPass(m); err != nil {
					t.Fatal(err)
				}
			}
			// The sums are collectives inside the passes; no rank keeps a whole gradient.
			if _, n, err := g.CommTotals(); err != nil || n == 0 {
				t.Fatalf("collectives inside the passes: %d bytes, %v", n, err)
			}
			infos, err := m.Tensors()
			if err != nil {
				t.Fatal(err)
			}
			grad := make([]float32, numel(infos[0].Shape))
			if err := Read(m, infos[0].Name, Grad, grad); err == nil && slices.ContainsFunc(grad, func(v float32) bool { return v != 0 }) {
				t.Fatalf("%s keeps a whole gradient after a stage 2 pass", infos[0].Name)
			}
		}
		a, err := m.Step(opt)
		if err != nil {
			t.Fatal(err)
		}
		b, err := want.Step(opt)
		if err != nil {
			t.Fatal(err)
		}
		if a.GradNorm != b.GradNorm || !(b.GradNorm > opt.MaxGradNorm) {
			t.Fatalf("step %d: grad norm %v, one process %v (want it clipped)", s, a.GradNorm, b.GradNorm)
		}
		if stage < 3 {
			if err := g.AllGatherParams(m, 1<<20); err != nil { // 1 MiB: several rounds
				t.Fatal(err)
			}
		}
	}
	if err := g.HoldWeights(m); err != nil { // stage 3: whole for the reads below
		t.Fatal(err)
	}
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	same := func(kind Kind) {
		t.Helper()
		for _, ti := range infos {
			a, b := make([]float32, numel(ti.Shape)), make([]float32, numel(ti.Shape))
			if err := Read(m, ti.Name, kind, a); err != nil {
				t.Fatal(err)
			}
			if err := Read(want, ti.Name, kind, b); err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s[%d] (kind %d): %v, one process %v", ti.Name, i, kind, a[i], b[i])
				}
			}
		}
	}
	same(Weight)
	// Read whole only on rank 0, after the gather, and until the next shard.
	if err := Read(m, infos[0].Name, ExpAvg, make([]float32, numel(infos[0].Shape))); err == nil || !strings.Contains(err.Error(), "sharded over 2 ranks") {
		t.Fatalf("reading sharded moments: %v", err)
	}
	if err := g.GatherOptimizer(m, 0); err != nil {
		t.Fatal(err)
	}
	if g.Rank() == 0 {
		same(ExpAvg)
		same(ExpAvgSq)
	}
	if err := g.ShardOptimizer(m); err != nil {
		t.Fatal(err)
	}
	if err := Read(m, infos[0].Name, ExpAvg, make([]float32, numel(infos[0].Shape))); err == nil {
		t.Fatal("the gathered moments are still read after the shard")
	}
	if err := g.ReleaseWeights(m); err != nil {
		t.Fatal(err)
	}
}
