package memplan

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainspec"
)

// Each stage divides its part of the tiny shape's training state (P = 107,072 parameters,
// tinyAgent) by the 4 ranks sharing it; the rest stays whole.
func TestShardStagesByHand(t *testing.T) {
	const P = 107_072
	a := tinyAgent(t)
	a.Device.CUDA, a.ShardRanks = true, 4
	plan := func(stage int, offload, rolloutOnly bool) *Plan {
		t.Helper()
		b := a
		b.Shard, b.Offload, b.RolloutOnly = stage, offload, rolloutOnly
		p, err := New([]Agent{b})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Stage 0: 4 ranks hold what one process does.
	checkLines(t, plan(0, false, false), map[string]int64{"trainer weights (f32)": 4 * P, "AdamW moments (2 x f32)": 8 * P,
		"gradients": 4 * P, "reference model (f32)": 4 * P, "checkpoint": 12 * P})
	// Stage 1: a quarter of the moments (from the start: never whole); the updated weights'
	// all-gather sends one bucket and receives one; rank 0 gathers all moments into host
	// tensors before a checkpoint.
	p := plan(1, false, false)
	checkLines(t, p, map[string]int64{"trainer weights (f32)": 4 * P, "AdamW moments (2 x f32, 1/4)": 8 * P / 4,
		"gradients": 4 * P, "parameter all-gather": 2 * 25 << 20, "checkpoint": 12*P + 8*P})
	if l := lineOf(t, p, 0, "AdamW moments"); !l.Device {
		t.Errorf("stage 1 moments %+v are not on the GPU", l)
	}
	// Stage 2: a quarter of the gradients' sums, and what a pass holds before they are
	// summed, with a 25 MiB bucket: every gradient, or with checkpointing two layers' (one
	// summed behind the other's backward; each 64 x 64 q and o, 32 x 64 k and v, three
	// 64 x 128 MLP matrices, 128 bias values, two norms of 64: 37,120) and the embedding's
	// and final norm's (512 x 64 + 64).
	checkLines(t, plan(2, false, false), map[string]int64{"AdamW moments (2 x f32, 1/4)": 8 * P / 4,
		"gradients (1/4 of the sums)": 4 * P / 4, "gradients on their way to the sum (a pass's all": 4*P + 25<<20})
	a.GradCheckpoint = true
	checkLines(t, plan(2, false, false), map[string]int64{"gradients on their way to the sum (two layers'": 4*(2*37_120+512*64+64) + 25<<20})
	a.GradCheckpoint = false
	// Stage 3: a quarter of the weights and of the reference, a layer (37,120) and the
	// embedding and final norm gathered in f32 while training, no all-gather after a step;
	// at start the agent's weights are whole, as they are loaded, until each rank keeps its
	// part.
	p3 := plan(3, false, false)
	checkLines(t, p3, map[string]int64{"trainer weights (f32, 1/4)": 4 * P / 4,
		"reference model (f32, 1/4)": 4 * P / 4, "gathered weights (stage 3": 4 * (37_120 + 512*64 + 64),
		"trainer weights, the rest until sharded": 4*P - 4*P/4, "reference model, the rest until sharded": 4*P - 4*P/4})
	for _, l := range p3.Agents[0].Lines {
		if strings.HasPrefix(l.Name, "parameter all-gather") {
			t.Errorf("stage 3 plans %q", l.Name)
		}
	}
	// Offload: the moments in host memory, and a chunk of the weights and gradient of a
	// parameter there for its update: the largest tensor (the 512 x 64 embedding) is less
	// than a chunk.
	p = plan(1, true, false)
	checkLines(t, p, map[string]int64{"AdamW moments (2 x f32, 1/4, host)": 8 * P / 4,
		"optimizer step (weights and gradient through the host": 2 * 4 * 512 * 64})
	if l := lineOf(t, p, 0, "AdamW moments"); l.Device {
		t.Errorf("offloaded moments %+v are on the GPU", l)
	}
	// A rank of another agent's group holds none of the agent's training state; it receives
	// the weights for its rollout engine at each sync.
	for _, l := range plan(1, false, true).Agents[0].Lines {
		if !strings.HasPrefix(l.Name, "sync export") && !strings.Contains(l.Name, "llama.cpp") && !strings.HasPrefix(l.Name, "KV cache") {
			t.Errorf("a rank serving only the rollouts plans %q", l.Name)
		}
	}
	a.Shard = 4
	if _, err := New([]Agent{a}); err == nil {
		t.Error("stage 4: no error")
	}
}

func TestPlacementsOrderAndFlags(t *testing.T) {
	var got []string
	for _, p := range Placements(8, 2)[:8] {
		got = append(got, flags(p))
	}
	want := []string{"--shard 0", "--shard 1", "--shard 2", "--shard 0 --agent-ranks 0-3,4-7", "--shard 1 --agent-ranks 0-3,4-7",
		"--shard 2 --agent-ranks 0-3,4-7", "--shard 3", "--shard 3 --agent-ranks 0-3,4-7"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("cheapest first: %q, want %q", got, want)
	}
	if n := len(Placements(8, 2)); n != 16 {
		t.Errorf("%d placements of 2 agents over 8 ranks, want 16 (4 stages x groups or not x offload or not)", n)
	}
	// One process: nothing to shard or group; 3 agents do not split 8 ranks evenly.
	if ps := Placements(1, 2); len(ps) != 2 || flags(ps[1]) != "--shard 0 --offload optimizer" {
		t.Errorf("one process: %+v", ps)
	}
	for _, p := range Placements(8, 3) {
		if p.AgentRanks != nil {
			t.Errorf("3 agents over 8 ranks get %s", flags(p))
		}
	}
}

// onGPU is the paper's trainer: on a GPU, with gradient checkpointing.
var onGPU = trainspec.ModelPlacement{Device: trainspec.Device{CUDA: true}, GradCheckpoint: true}

// paperAgents are the paper's setting: Qwen2.5-3B and Qwen3-4B fully fine-tuned in bf16
// (f32 masters) on GPUs with gradient checkpointing, micro-batches of one GRPO group (g 5)
// of 2,048 + 5,120 tokens, and each agent's rollout engine on the same GPU (bf16 weights,
// 16 slots, f16 KV cache). The batch of 256 problems sets how many micro-batches there
// are, not their size.
func paperAgents() []Agent {
	var agents []Agent
	for _, name := range []string{"qwen2.5-3b", "qwen3-4b"} {
		agents = append(agents, Agent{Name: name, Shape: model.Presets[name], DType: BF16, ModelPlacement: onGPU,
			FusedAttention: true, MicroBatchSeqs: 5, PromptTokens: 2048, ResponseTokens: 5120, RolloutType: gguf.TypeBF16,
			Slots: 16, KVType: "f16", GPULayers: 99})
	}
	return agents
}

func TestPaperSettingPerRank(t *testing.T) {
	agents := paperAgents()
	const P = 3_085_938_688 + 4_022_468_096 // both agents' parameters
	b := Budget{Device: 80e9}               // 80 GB per GPU
	peak := func(p trainspec.Placement) int64 {
		t.Helper()
		_, dev, err := RankPeaks(agents, p, 8)
		if err != nil {
			t.Fatal(err)
		}
		return dev
	}
	// Stage 1 keeps 1/8 of both agents' 8-byte moments: 7 bytes per parameter less, the
	// peak still the larger agent's training.
	if d := peak(trainspec.Placement{}) - peak(trainspec.Placement{Shard: 1}); d != 7*P {
		t.Errorf("stage 1 saves %d bytes per rank, want 7 x %d", d, int64(P))
	}
	// Stage 2 adds 1/8 of the gradients: of the agent whose training is the peak (7/8 of
	// its 4 bytes per parameter), less what a checkpointed pass holds before the sums: two
	// layers of Qwen3-4B (each q and o 2560 x 4096, k and v 2560 x 1024, three MLP matrices
	// 2560 x 9728, two head norms of 128, two layer norms of 2560), its tied embedding
	// (151936 x 2560) and final norm, and a bucket.
	const inFlight = 4 * (2*(2*2560*4096+2*2560*1024+3*2560*9728+2*128+2*2560) + 151936*2560 + 2560)
	if got := agents[1].gradsInFlight(); got != inFlight {
		t.Errorf("a stage 2 pass of Qwen3-4B holds %d bytes of whole gradients, want %d", got, inFlight)
	}
	// Compared while training: loading an agent whole before sharding it is stage 2's peak.
	training := func(p trainspec.Placement) int64 {
		t.Helper()
		plans, err := Ranks(agents, p, 8)
		if err != nil {
			t.Fatal(err)
		}
		var n, worst int64
		for _, ap := range plans[0].Agents {
			n, worst = n+ap.steady(true), max(worst, ap.phase(PhaseTrain, true))
		}
		return n + worst
	}
	if d := training(trainspec.Placement{Shard: 1}) - training(trainspec.Placement{Shard: 2}); d != 7*4*4_022_468_096/8-inFlight-trainspec.BucketBytes {
		t.Errorf("stage 2 saves %d bytes per rank while training", d)
	}
	// Stage 3 trains in 71.28 GiB; its start, with Qwen3-4B's f32 weights and bf16
	// reference whole before each rank keeps its part (the moments never are), is less.
	if got := float64(training(trainspec.Placement{Shard: 3})) / (1 << 30); math.Abs(got-71.28) > 0.005 || peak(trainspec.Placement{Shard: 3}) != training(trainspec.Placement{Shard: 3}) {
		t.Errorf("stage 3 trains in %.2f GiB per rank (want 71.28) and peaks at %d bytes", got, peak(trainspec.Placement{Shard: 3}))
	}
	line, err := CheapestLine(agents, 8, b)
	if err != nil {
		t.Fatal(err)
	}
	const want = "cheapest placement that fits 8 ranks: --shard 3 (busiest rank: GPU 71.28 GiB, host 75.17 GiB)"
	if line != want {
		t.Errorf("got  %s\nwant %s", line, want)
	}
	var out bytes.Buffer
	if err := WritePlacements(&out, agents, 8, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per rank of 8", "--shard 0 ", "GPU 161.44 GiB", "does not fit", "--shard 3 --agent-ranks 0-3,4-7 --offload optimizer", want} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
