package torch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// bf16 rounds to the nearest bfloat16 (ties to even), as libtorch's cast does.
func bf16(f float32) float32 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// bf16 compute runs the same code on every device: on the CPU its log-probs differ from f32
// (it really computes in bf16) by no more than bf16 rounding explains.
func TestBF16LogProbsNearF32(t *testing.T) {
	rt := openForTest(t)
	for _, tc := range tinyConfigs {
		t.Run(tc.name, func(t *testing.T) {
			f32 := randomModel(t, rt, tc.cfg, ModelOptions{}, 21)
			b16 := randomModel(t, rt, tc.cfg, ModelOptions{Precision: trainspec.PrecisionBF16}, 21)
			prompts, responses := randomSeqs(rand.New(rand.NewPCG(5, 6)), tc.cfg.VocabSize, 6)
			want, wantEnt, err := f32.LogProbs(prompts, responses, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			got, gotEnt, err := b16.LogProbs(prompts, responses, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			var sum, worst float64
			n := 0
			for i := range want {
				for j := range want[i] {
					d := math.Abs(float64(got[i][j] - want[i][j]))
					sum, worst, n = sum+d, math.Max(worst, d), n+1
				}
			}
			t.Logf("bf16 vs f32 log-probs: mean |delta| %.2g, max %.2g over %d tokens; entropies differ by %.2g", sum/float64(n), worst, n, maxRelDiff(gotEnt, wantEnt))
			// bf16 keeps 8 significant bits: each weight and activation is off by up to
			// 2^-9 relative, which two layers and a softmax turn into a few 1e-3 to 1e-2.
			if sum == 0 {
				t.Error("bf16 log-probs equal the f32 ones exactly: the model did not compute in bf16")
			}
			if sum/float64(n) > 3e-2 || worst > 0.15 || maxRelDiff(gotEnt, wantEnt) > 0.1 {
				t.Errorf("bf16 log-probs differ from f32 by %.3g mean, %.3g max: more than bf16 rounding", sum/float64(n), worst)
			}
		})
	}
}

// Under bf16 compute the trained tensors stay f32 masters; frozen ones (a reference model, a
// LoRA base) are stored in bf16, the dtype they are used in.
func TestBF16StorageDTypes(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	dtypes := func(m *Model) map[DType]int {
		infos, err := m.Tensors()
		if err != nil {
			t.Fatal(err)
		}
		n := map[DType]int{}
		for _, ti := range infos {
			if ti.Adapter {
				if ti.DType != Float32 {
					t.Errorf("adapter %s stored as %d, want f32", ti.Name, ti.DType)
				}
				continue
			}
			n[ti.DType]++
		}
		return n
	}
	actor := randomModel(t, rt, cfg, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true}, 1)
	if n := dtypes(actor); n[BFloat16] != 0 || n[Float32] == 0 {
		t.Errorf("trainable bf16 model stores %v, want f32 masters only", n)
	}
	ref, err := actor.Reference()
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Free()
	if n := dtypes(ref); n[Float32] != 0 {
		t.Errorf("frozen bf16 reference stores %v, want bf16 only", n)
	}
	// The reference computes exactly what its f32 source computes in bf16.
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(1, 2)), cfg.VocabSize, 4)
	a, _, err := actor.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := ref.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxRelDiff(a, r); d != 0 {
		t.Errorf("bf16 reference differs from its source by %g; storing a frozen model in bf16 must be exact", d)
	}
	lora := randomModel(t, rt, cfg, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true,
		LoRA: trainspec.LoRA{Rank: 2, Alpha: 4, Targets: []string{"q", "down"}}}, 1)
	if n := dtypes(lora); n[Float32] != 0 {
		t.Errorf("LoRA base under bf16 compute stores %v, want bf16 only", n)
	}
	// bf16 compute needs f32 masters.
	if _, err := rt.NewModel(cfg, ModelOptions{DType: Float64, Precision: trainspec.PrecisionBF16}); err == nil || !strings.Contains(err.Error(), "Float32 master") {
		t.Errorf("f64 parameters with bf16 compute: %v", err)
	}
}

// The point of f32 masters: AdamW steps far below bf16's resolution accumulate in the
// masters and reach the bf16 weights the forward uses, where bf16 weights updated in place
// would round every step away.
func TestBF16MastersKeepSmallUpdates(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	const name = "model.layers.0.mlp.up_proj.weight"
	m := randomModel(t, rt, cfg, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true}, 4)
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(9, 9)), cfg.VocabSize, 6)
	read := func() []float32 {
		w := make([]float32, cfg.IntermediateSize*cfg.HiddenSize)
		if err := Read(m, name, Weight, w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w0 := read()
	lp0, _, err := m.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Weights are about 0.18 (1/sqrt(32)): a bf16 step there is 2^-10, about 1e-3. Each
	// AdamW step moves a weight by about lr = 5e-5, a twentieth of that.
	opt := trainspec.AdamW{LR: 5e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	const steps = 20
	alone := make([]float32, len(w0)) // bf16 weights updated in place by the same steps
	for i, v := range w0 {
		alone[i] = bf16(v)
	}
	prev := w0
	for s := 0; s < steps; s++ {
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
		if st, err := m.Step(opt); err != nil || st.Skipped {
			t.Fatalf("step %d: %v, skipped %v", s, err, st.Skipped)
		}
		w := read()
		for i := range w {
			alone[i] = bf16(alone[i] + (w[i] - prev[i]))
		}
		prev = w
	}
	var moved, visible, lost, fine int
	for i := range w0 {
		if prev[i] != w0[i] {
			moved++
		}
		if bf16(prev[i]) != bf16(w0[i]) {
			visible++
		}
		if alone[i] != bf16(w0[i]) {
			lost++ // counts the few that bf16 alone did move
		}
		if math.Float32bits(prev[i])&0xffff != 0 {
			fine++
		}
	}
	n := len(w0)
	t.Logf("%d steps at lr %g on %d weights: masters moved %d, the bf16 weights used in compute %d, bf16 weights alone %d", steps, opt.LR, n, moved, visible, lost)
	if moved < n*9/10 {
		t.Errorf("only %d of %d master weights moved", moved, n)
	}
	if fine == 0 {
		t.Error("every master weight is a bf16 value: the masters are not f32")
	}
	if visible < n/4 || lost > visible/4 {
		t.Errorf("bf16 weights in compute changed in %d of %d places, bf16 weights alone in %d: the masters should keep far more", visible, n, lost)
	}
	lp, _, err := m.LogProbs(prompts, responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	if maxRelDiff(lp, lp0) == 0 {
		t.Error("the accumulated updates did not change the bf16 forward")
	}
}

// A model may live on the CPU or a GPU libtorch sees; asking for a GPU this plugin cannot
// use fails in one line that says what to do.
func TestDevices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want trainspec.Device
		bad  bool
	}{
		{"cpu", trainspec.CPU, false}, {"cuda", trainspec.Device{CUDA: true}, false}, {"cuda:0", trainspec.Device{CUDA: true}, false},
		{" cuda:3 ", trainspec.Device{CUDA: true, Index: 3}, false}, {"gpu", trainspec.CPU, true}, {"cuda:-1", trainspec.CPU, true},
		{"cuda:x", trainspec.CPU, true}, {"CUDA0", trainspec.CPU, true}, {"", trainspec.CPU, true},
	} {
		d, err := trainspec.ParseDevice(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && d != tc.want) {
			t.Errorf("ParseDevice(%q) = %v, %v", tc.in, d, err)
		}
	}
	if s := (trainspec.Device{CUDA: true, Index: 2}).String(); s != "cuda:2" {
		t.Errorf("String %q", s)
	}
	rt := openForTest(t)
	gpus, built := rt.CUDADevices()
	auto, err := rt.ResolveDevice(trainspec.DeviceAuto)
	if err != nil || auto.CUDA != (gpus > 0) || auto.Index != 0 {
		t.Errorf("auto with %d GPUs: %v, %v", gpus, auto, err)
	}
	if d, err := rt.ResolveDevice("cpu"); err != nil || d != trainspec.CPU {
		t.Errorf("cpu: %v, %v", d, err)
	}
	cfg := tinyConfigs[0].cfg
	// One past the last GPU is refused everywhere; on this CPU-only libtorch, every GPU is.
	beyond := trainspec.Device{CUDA: true, Index: gpus}
	err = rt.CheckDevice(beyond)
	switch {
	case err == nil || strings.Contains(err.Error(), "\n"):
		t.Errorf("%v with %d GPUs: %q, want one line", beyond, gpus, err)
	case !built && !strings.Contains(err.Error(), "without CUDA: build it against a CUDA PyTorch (see kernels/README.md)"):
		t.Errorf("%v on a libtorch without CUDA: %q does not say what to do", beyond, err)
	case built && gpus == 0 && !strings.Contains(err.Error(), "sees no GPU"):
		t.Errorf("%v on a CUDA build without GPUs: %q", beyond, err)
	}
	if _, err2 := rt.NewModel(cfg, ModelOptions{ModelPlacement: trainspec.ModelPlacement{Device: beyond}}); err2 == nil || !strings.Contains(err2.Error(), err.Error()) {
		t.Errorf("new model on %v: %v, want %v", beyond, err2, err)
	}
	if _, err := rt.ResolveDevice(fmt.Sprint(beyond)); err == nil {
		t.Errorf("ResolveDevice(%v) accepted a GPU this libtorch does not have", beyond)
	}
}

// The GPU runs bf16 with checkpointing and LoRA: on the CPU, a checkpointed bf16 backward
// gives the stored one's gradients, and a bf16 LoRA step with dropout trains the f32
// adapters and leaves the bf16 base alone.
func TestBF16CheckpointAndLoRA(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[1].cfg
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(3, 3)), cfg.VocabSize, 5)
	const name = "model.layers.1.self_attn.o_proj.weight"
	grad := func(ckpt bool) []float32 {
		m := randomModel(t, rt, cfg, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true, ModelPlacement: trainspec.ModelPlacement{GradCheckpoint: ckpt}}, 8)
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
		g := make([]float32, cfg.HiddenSize*cfg.NumHeads*cfg.HeadDim)
		if err := Read(m, name, Grad, g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	stored, ckpt := grad(false), grad(true)
	nonzero := 0
	for i := range stored {
		if stored[i] != ckpt[i] {
			t.Fatalf("gradient %d: %g checkpointed, %g stored", i, ckpt[i], stored[i])
		}
		if stored[i] != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("zero gradient: the comparison proves nothing")
	}

	m := randomModel(t, rt, cfg, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true,
		LoRA: trainspec.LoRA{Rank: 2, Alpha: 4, Targets: []string{"o", "up"}, Dropout: 0.1, Seed: 5}}, 8)
	before := map[string][]float32{}
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	size := func(ti TensorInfo) int {
		n := 1
		for _, d := range ti.Shape {
			n *= int(d)
		}
		return n
	}
	for _, ti := range infos {
		before[ti.Name] = make([]float32, size(ti))
		if err := Read(m, ti.Name, Weight, before[ti.Name]); err != nil {
			t.Fatal(err)
		}
	}
	// B starts at zero, so the first step moves B only; the second moves A as well.
	for s := 0; s < 2; s++ {
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range infos {
		w := make([]float32, size(ti))
		if err := Read(m, ti.Name, Weight, w); err != nil {
			t.Fatal(err)
		}
		changed := maxRelDiff([][]float32{w}, [][]float32{before[ti.Name]}) != 0
		if changed != ti.Adapter {
			t.Errorf("%s (adapter %v) changed: %v", ti.Name, ti.Adapter, changed)
		}
	}
}
