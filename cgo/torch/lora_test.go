package torch

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// allTargets is a rank-4 LoRA on every projection, as the trainer's default.
func allTargets(rank int, dropout float64) trainspec.LoRA {
	return trainspec.LoRA{Rank: rank, Alpha: 2 * float64(rank), Targets: trainspec.LoRATargets, Dropout: dropout, Seed: 5}
}

// copyTensors copies every tensor of src that dst also has, through float64.
func copyTensors(t *testing.T, dst, src *Model) {
	t.Helper()
	infos, err := dst.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range infos {
		buf := tensorBuf(t, src, ti.Name)
		if err := Read(src, ti.Name, Weight, buf); err != nil {
			t.Fatal(err)
		}
		if err := Write(dst, ti.Name, Weight, buf); err != nil {
			t.Fatal(err)
		}
	}
}

// zeroB sets every lora_B of m to zeros.
func zeroB(t *testing.T, m *Model) {
	t.Helper()
	infos, _ := m.Tensors()
	for _, ti := range infos {
		if strings.HasSuffix(ti.Name, ".lora_B.weight") {
			if err := Write(m, ti.Name, Weight, tensorBuf(t, m, ti.Name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Adapters sit on a frozen base: with B = 0 (a fresh adapter) the model is the base
// exactly; with adapters off it is the base exactly for any A and B; with B != 0 it is not.
func TestLoRAIsTheBaseUntilBMoves(t *testing.T) {
	rt := openForTest(t)
	for _, tc := range tinyConfigs {
		t.Run(tc.name, func(t *testing.T) {
			base := randomModel(t, rt, tc.cfg, ModelOptions{}, 11)
			// Base tensors come first in checkpoint order, so the same seed gives the same base;
			// the adapters then get random (non-zero) values too.
			lora := randomModel(t, rt, tc.cfg, ModelOptions{Trainable: true, LoRA: allTargets(4, 0)}, 11)
			fresh, err := rt.NewModel(tc.cfg, ModelOptions{LoRA: allTargets(4, 0)})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Free()
			copyBase(t, fresh, base)
			if err := fresh.Finalize(); err != nil {
				t.Fatal(err)
			}
			prompts, responses := randomSeqs(rand.New(rand.NewPCG(3, 4)), tc.cfg.VocabSize, 4)
			want, _, err := base.LogProbs(prompts, responses, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			off, _, err := lora.BaseLogProbs(prompts, responses, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(off, want); d != 0 {
				t.Errorf("adapters off: log-probs differ from the base by %g", d)
			}
			on, _, _ := lora.LogProbs(prompts, responses, 0.7)
			if d := maxRelDiff(on, want); d < 1e-4 {
				t.Errorf("random adapters moved the log-probs by only %g", d)
			}
			init, _, _ := fresh.LogProbs(prompts, responses, 0.7)
			if d := maxRelDiff(init, want); d != 0 {
				t.Errorf("freshly initialised adapters (B = 0): log-probs differ from the base by %g", d)
			}
			zeroB(t, lora)
			zero, _, _ := lora.LogProbs(prompts, responses, 0.7)
			if d := maxRelDiff(zero, want); d != 0 {
				t.Errorf("B = 0: log-probs differ from the base by %g", d)
			}
		})
	}
}

// copyBase sets dst's base tensors from src (a model without adapters).
func copyBase(t *testing.T, dst, src *Model) {
	t.Helper()
	infos, _ := src.Tensors()
	for _, ti := range infos {
		buf := tensorBuf(t, src, ti.Name)
		if err := Read(src, ti.Name, Weight, buf); err != nil {
			t.Fatal(err)
		}
		if err := dst.SetTensor(ti.Name, Float64, ti.Shape, f64Bytes(buf)); err != nil {
			t.Fatal(err)
		}
	}
}

func f64Bytes(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := math.Float64bits(x)
		for i := 0; i < 8; i++ {
			b = append(b, byte(u>>(8*i)))
		}
	}
	return b
}

// A new adapter is PEFT's: A uniform in +-1/sqrt(in), B zeros, the same for the same seed
// and different for another.
func TestLoRAInitIsSeededKaimingUniform(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	read := func(seed uint64, name string) []float64 {
		l := allTargets(4, 0)
		l.Seed = seed
		m, err := rt.NewModel(cfg, ModelOptions{LoRA: l})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		buf := tensorBuf(t, m, name)
		if err := Read(m, name, Weight, buf); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	const a = "model.layers.1.mlp.down_proj.lora_A.weight" // in = intermediate size 48
	a1, a2, other := read(5, a), read(5, a), read(6, a)
	bound := 1 / math.Sqrt(float64(cfg.IntermediateSize))
	maxAbs := 0.0
	for i := range a1 {
		maxAbs = math.Max(maxAbs, math.Abs(a1[i]))
		if a1[i] != a2[i] {
			t.Fatal("same seed, different A")
		}
	}
	if maxAbs > bound || maxAbs < 0.8*bound {
		t.Errorf("A's largest |value| %g, want just under %g", maxAbs, bound)
	}
	if a1[0] == other[0] && a1[1] == other[1] {
		t.Error("another seed gave the same A")
	}
	for _, v := range read(5, "model.layers.0.self_attn.q_proj.lora_B.weight") {
		if v != 0 {
			t.Fatal("B is not zero-initialised")
		}
	}
}

// The gradients of the adapters (checkpointed layers, chunked lm_head, frozen base) match
// central finite differences in float64; the frozen base has none.
func TestLoRAGradientFiniteDifference(t *testing.T) {
	f := newLossFixture(t, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LogitChunk: 2, LoRA: allTargets(3, 0)})
	batch := PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios([][]float64{{1.05, 0.7, 1.5}, {4, 0.95, 1.2}}),
		Advantages: [][]float32{{0.8, 0.8, -1.3}, {-0.5, 1.1, 1.1}}}
	cfg := trainspec.LossConfig{Temperature: 0.6, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 3, EntropyCoef: 0.05}
	if _, err := f.m.PolicyLoss(batch, cfg, true, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		idx  int
	}{
		{"model.layers.0.self_attn.q_proj.lora_A.weight", 7},
		{"model.layers.0.self_attn.v_proj.lora_B.weight", 5},
		{"model.layers.1.self_attn.o_proj.lora_A.weight", 20},
		{"model.layers.0.mlp.gate_proj.lora_B.weight", 11},
		{"model.layers.1.mlp.up_proj.lora_A.weight", 3},
		{"model.layers.1.mlp.down_proj.lora_B.weight", 30},
		{"model.layers.1.self_attn.k_proj.lora_A.weight", 9},
	} {
		checkGradFD(t, f.m, p.name, p.idx, policyLoss(t, f.m, batch, cfg))
	}
	const frozen = "model.layers.0.self_attn.q_proj.weight"
	g := tensorBuf(t, f.m, frozen)
	if err := Read(f.m, frozen, Grad, g); err != nil {
		t.Fatal(err)
	}
	for _, v := range g {
		if v != 0 {
			t.Fatalf("frozen %s has a gradient", frozen)
		}
	}
	if err := Write(f.m, frozen, Grad, g); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("writing a frozen weight's gradient: %v, want a frozen-weight error", err)
	}
}

// Checkpointed layers recompute the adapters with the same dropout masks: gradients equal
// the stored-activation path's. Dropout is off in passes without a gradient.
func TestLoRADropoutIsSeededAndCheckpointSafe(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[1].cfg
	opts := ModelOptions{DType: Float64, Trainable: true, LogitChunk: -1, LoRA: allTargets(4, 0.3)}
	plain := randomModel(t, rt, cfg, opts, 4)
	opts.GradCheckpoint, opts.LogitChunk = true, 2
	ckpt := randomModel(t, rt, cfg, opts, 4)
	noDrop := opts
	noDrop.LoRA.Dropout = 0
	clean := randomModel(t, rt, cfg, noDrop, 4)
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(5, 5)), cfg.VocabSize, 4)
	var losses []float64
	for _, m := range []*Model{plain, ckpt} {
		l, err := m.SFTLoss(prompts, responses, true, 1)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	noGrad, _ := clean.SFTLoss(prompts, responses, false, 1)
	evalLoss, _ := plain.SFTLoss(prompts, responses, false, 1)
	if evalLoss != noGrad {
		t.Errorf("loss without a gradient %g, without dropout %g: dropout ran outside training", evalLoss, noGrad)
	}
	if losses[0] == noGrad {
		t.Error("the training pass's loss equals the dropout-free one: dropout did not run")
	}
	if math.Abs(losses[0]-losses[1]) > 1e-12 {
		t.Errorf("training losses %g and %g: the passes drew different masks", losses[0], losses[1])
	}
	infos, _ := plain.Tensors()
	for _, ti := range infos {
		if !ti.Adapter {
			continue
		}
		a, b := tensorBuf(t, plain, ti.Name), tensorBuf(t, ckpt, ti.Name)
		Read(plain, ti.Name, Grad, a)
		Read(ckpt, ti.Name, Grad, b)
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-12+1e-9*math.Abs(a[i]) {
				t.Fatalf("%s[%d]: plain %g, checkpointed %g", ti.Name, i, a[i], b[i])
			}
		}
	}
}

// Training changes the adapters only: every base tensor stays bit-identical (weight decay
// included), the adapters move and have AdamW moments, the base has none. The merged
// weights reproduce the adapted model's log-probs in a plain model.
func TestLoRATrainsAdaptersOnlyAndMerges(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	m := randomModel(t, rt, cfg, ModelOptions{Trainable: true, LoRA: allTargets(4, 0.1)}, 2)
	zeroB(t, m)
	infos, _ := m.Tensors()
	before := map[string][]float32{}
	for _, ti := range infos {
		buf := make([]float32, len(tensorBuf(t, m, ti.Name)))
		Read(m, ti.Name, Weight, buf)
		before[ti.Name] = buf
	}
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(8, 1)), cfg.VocabSize, 4)
	for i := 0; i < 3; i++ {
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range infos {
		after := make([]float32, len(before[ti.Name]))
		Read(m, ti.Name, Weight, after)
		same := true
		for i := range after {
			if math.Float32bits(after[i]) != math.Float32bits(before[ti.Name][i]) {
				same = false
				break
			}
		}
		if ti.Adapter == same {
			t.Errorf("%s (adapter %v): unchanged %v after three steps", ti.Name, ti.Adapter, same)
		}
		if err := Read(m, ti.Name, ExpAvg, after); (err == nil) != ti.Adapter {
			t.Errorf("%s: reading its AdamW moment gave %v", ti.Name, err)
		}
	}
	plain := randomModel(t, rt, cfg, ModelOptions{}, 99)
	pinfos, _ := plain.Tensors()
	for _, ti := range pinfos {
		buf := make([]float32, len(before[ti.Name]))
		if err := Read(m, ti.Name, Merged, buf); err != nil {
			t.Fatal(err)
		}
		if err := Write(plain, ti.Name, Weight, buf); err != nil {
			t.Fatal(err)
		}
	}
	want, _, _ := m.LogProbs(prompts, responses, 1)
	got, _, _ := plain.LogProbs(prompts, responses, 1)
	if d := maxRelDiff(got, want); d > 1e-5 {
		t.Errorf("merged weights' log-probs differ from the adapted model's by %g", d)
	}
	if d := maxRelDiff(want, mustLogProbs(t, m, prompts, responses, true)); d < 1e-4 {
		t.Errorf("three steps moved the log-probs by only %g", d)
	}
}

func mustLogProbs(t *testing.T, m *Model, prompts, responses [][]int32, base bool) [][]float32 {
	t.Helper()
	f := m.LogProbs
	if base {
		f = m.BaseLogProbs
	}
	lp, _, err := f(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	return lp
}

// A bf16-stored base computes exactly what an fp32 base holding the same (bf16) values
// does, and still trains its adapters.
func TestLoRABF16BaseMatchesFP32(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[2].cfg
	l := allTargets(4, 0)
	l.BaseBF16 = true
	half := randomModel(t, rt, cfg, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LoRA: l}, 6)
	full := randomModel(t, rt, cfg, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LoRA: allTargets(4, 0)}, 6)
	copyTensors(t, full, half)
	infos, _ := half.Tensors()
	for _, ti := range infos {
		if want := map[bool]DType{false: BFloat16, true: Float32}[ti.Adapter]; ti.DType != want {
			t.Fatalf("%s is stored as %d, want %d", ti.Name, ti.DType, want)
		}
	}
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(2, 2)), cfg.VocabSize, 3)
	for _, base := range []bool{false, true} {
		if d := maxRelDiff(mustLogProbs(t, half, prompts, responses, base), mustLogProbs(t, full, prompts, responses, base)); d != 0 {
			t.Errorf("base only %v: bf16 and fp32 storage of the same values differ by %g", base, d)
		}
	}
	for _, m := range []*Model{half, full} {
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
	}
	const name = "model.layers.1.mlp.up_proj.lora_A.weight"
	a, b := tensorBuf(t, half, name), tensorBuf(t, full, name)
	Read(half, name, Grad, a)
	Read(full, name, Grad, b)
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6*math.Max(1, math.Abs(b[i])) || b[i] == 0 && i == 0 {
			t.Fatalf("%s[%d] gradient: bf16 base %g, fp32 base %g", name, i, a[i], b[i])
		}
	}
}

func TestLoRARejectsBadSettings(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	for _, tc := range []struct {
		name string
		l    trainspec.LoRA
		want string
	}{
		{"negative rank", trainspec.LoRA{Rank: -1, Alpha: 1, Targets: trainspec.LoRATargets}, "at least 0"},
		{"rank above hidden", trainspec.LoRA{Rank: 33, Alpha: 1, Targets: trainspec.LoRATargets}, "exceeds the model's hidden size 32"},
		{"NaN alpha", trainspec.LoRA{Rank: 4, Alpha: math.NaN(), Targets: trainspec.LoRATargets}, "alpha"},
		{"dropout 1", trainspec.LoRA{Rank: 4, Alpha: 8, Dropout: 1, Targets: trainspec.LoRATargets}, "dropout"},
		{"no targets", trainspec.LoRA{Rank: 4, Alpha: 8}, "at least one target"},
		{"unknown target", trainspec.LoRA{Rank: 4, Alpha: 8, Targets: []string{"lm_head"}}, "unknown LoRA target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := rt.NewModel(cfg, ModelOptions{LoRA: tc.l})
			if err == nil {
				m.Free()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
