package torch

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// checkpointed is a model on the CPU that recomputes each layer in its backward.
var checkpointed = trainspec.ModelPlacement{GradCheckpoint: true}

// A few hundred seeded SFT steps on a fixed set must drive the loss far down: the
// response is a deterministic function of the prompt, so it is learnable.
func TestSFTLearnsFixedSet(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	m := randomModel(t, rt, cfg, ModelOptions{Trainable: true, ModelPlacement: checkpointed}, 3)
	rng := rand.New(rand.NewPCG(42, 0))
	var prompts, responses [][]int32
	for i := 0; i < 8; i++ {
		p := []int32{int32(rng.IntN(cfg.VocabSize)), int32(rng.IntN(cfg.VocabSize))}
		r := []int32{(p[0] + 1) % int32(cfg.VocabSize), (p[1] * 3) % int32(cfg.VocabSize), p[0]}
		prompts, responses = append(prompts, p), append(responses, r)
	}
	opt := trainspec.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}
	first, last := 0.0, 0.0
	for step := 0; step < 300; step++ {
		// Two micro-batches of four, accumulated with scale 1/2.
		loss := 0.0
		for mb := 0; mb < 2; mb++ {
			l, err := m.SFTLoss(prompts[4*mb:4*mb+4], responses[4*mb:4*mb+4], true, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			loss += l / 2
		}
		st, err := m.Step(opt)
		if err != nil || st.Skipped {
			t.Fatalf("step %d: %v, skipped %v", step, err, st.Skipped)
		}
		if step == 0 {
			first = loss
		}
		last = loss
	}
	t.Logf("SFT loss %.4f -> %.4f over 300 steps", first, last)
	if last > 0.1*first {
		t.Errorf("loss went from %g to %g; want below a tenth", first, last)
	}
}

// One AdamW step on a known gradient matches torch.optim.AdamW's update written out by
// hand, including decoupled weight decay, bias correction and global-norm clipping.
func TestAdamWStepMatchesFormula(t *testing.T) {
	rt := openForTest(t)
	const name = "model.norm.weight"
	for _, tc := range []struct {
		name    string
		maxNorm float64
		coef    func(norm float64) float64
	}{
		{"no clipping needed", 100, func(float64) float64 { return 1 }},
		{"clipped to half the norm", -0.5, func(n float64) float64 { return 0.5 * n / (n + 1e-6) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := randomModel(t, rt, tinyConfigs[0].cfg, ModelOptions{DType: Float64, Trainable: true}, 9)
			w0 := tensorBuf(t, m, name)
			if err := Read(m, name, Weight, w0); err != nil {
				t.Fatal(err)
			}
			g := make([]float64, len(w0))
			sq := 0.0
			for i := range g {
				g[i] = math.Sin(float64(i)) * 0.3
				sq += g[i] * g[i]
			}
			norm := math.Sqrt(sq)
			opt := trainspec.AdamW{LR: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: tc.maxNorm}
			if tc.maxNorm < 0 {
				opt.MaxGradNorm = 0.5 * norm
			}
			if err := Write(m, name, Grad, g); err != nil {
				t.Fatal(err)
			}
			st, err := m.Step(opt)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.GradNorm-norm) > 1e-12 || st.Step != 1 {
				t.Errorf("grad norm %g step %d, want %g and 1", st.GradNorm, st.Step, norm)
			}
			w1 := tensorBuf(t, m, name)
			if err := Read(m, name, Weight, w1); err != nil {
				t.Fatal(err)
			}
			c := tc.coef(norm)
			for i := range w0 {
				gc := g[i] * c
				mh := (1 - opt.Beta1) * gc / (1 - opt.Beta1)
				vh := (1 - opt.Beta2) * gc * gc / (1 - opt.Beta2)
				want := w0[i]*(1-opt.LR*opt.WeightDecay) - opt.LR*mh/(math.Sqrt(vh)+opt.Eps)
				if math.Abs(w1[i]-want) > 1e-12 {
					t.Fatalf("weight %d: %g, want %g", i, w1[i], want)
				}
			}
			// Parameters without a gradient are untouched, weight decay included.
			other := "model.layers.0.input_layernorm.weight"
			a, b := tensorBuf(t, m, other), tensorBuf(t, m, other)
			Read(m, other, Weight, a)
			if _, err := m.Step(opt); err != nil {
				t.Fatal(err)
			}
			Read(m, other, Weight, b)
			if a[0] != b[0] {
				t.Errorf("%s changed without a gradient", other)
			}
		})
	}
}

func TestStepSkipsNonFiniteGradient(t *testing.T) {
	rt := openForTest(t)
	m := randomModel(t, rt, tinyConfigs[0].cfg, ModelOptions{Trainable: true}, 9)
	const name = "model.norm.weight"
	before := make([]float32, 32)
	Read(m, name, Weight, before)
	g := make([]float32, 32)
	g[3] = float32(math.Inf(1))
	if err := Write(m, name, Grad, g); err != nil {
		t.Fatal(err)
	}
	st, err := m.Step(trainspec.DefaultAdamW)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Skipped || st.SkippedTotal != 1 || st.Step != 0 {
		t.Fatalf("stats %+v, want a skipped, counted step and no AdamW step", st)
	}
	after := make([]float32, 32)
	Read(m, name, Weight, after)
	grad := make([]float32, 32)
	Read(m, name, Grad, grad)
	for i := range before {
		if before[i] != after[i] || grad[i] != 0 {
			t.Fatalf("element %d: weight %g -> %g, gradient %g; a skipped step changes nothing and drops the gradient", i, before[i], after[i], grad[i])
		}
	}
}

// The reference model is a frozen copy: training the policy moves the policy's log-probs,
// not the reference's.
func TestReferenceIsFrozen(t *testing.T) {
	rt := openForTest(t)
	m := randomModel(t, rt, tinyConfigs[1].cfg, ModelOptions{Trainable: true}, 9)
	ref, err := m.Reference()
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Free()
	p, r := randomSeqs(rand.New(rand.NewPCG(1, 3)), tinyConfigs[1].cfg.VocabSize, 3)
	ref0, _, _ := ref.LogProbs(p, r, 1)
	if _, err := m.SFTLoss(p, r, true, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); err != nil {
		t.Fatal(err)
	}
	pol, _, _ := m.LogProbs(p, r, 1)
	ref1, _, _ := ref.LogProbs(p, r, 1)
	if maxRelDiff(ref0, ref1) != 0 {
		t.Error("reference log-probs moved")
	}
	if maxRelDiff(pol, ref1) < 1e-4 {
		t.Error("policy log-probs did not move after a step")
	}
	if _, err := ref.SFTLoss(p, r, true, 1); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("backward through the reference: %v, want a frozen-model error", err)
	}
}

// --offload optimizer keeps the AdamW moments in host memory and updates a chunk of each
// parameter at a time there: on the CPU the same arithmetic as the update in place, so 3
// steps leave the same weights and moments, bit for bit, whole or with this rank's part of
// the moments (a cut inside the embedding). The embedding, 600,000 x 32 values, is more
// than one chunk.
func TestOffloadedOptimizerMatchesInPlace(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	cfg.VocabSize = 600_000
	if n := int64(cfg.VocabSize * cfg.HiddenSize); n <= trainspec.OffloadChunk {
		t.Fatalf("the embedding's %d values fit one chunk", n)
	}
	rng := rand.New(rand.NewPCG(5, 0))
	var prompts, responses [][]int32
	for range 4 {
		prompts = append(prompts, []int32{int32(rng.IntN(cfg.VocabSize)), int32(rng.IntN(cfg.VocabSize))})
		responses = append(responses, []int32{int32(rng.IntN(cfg.VocabSize)), int32(rng.IntN(cfg.VocabSize))})
	}
	opt := trainspec.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}
	for _, shard := range []struct{ Rank, World int }{{0, 1}, {1, 2}} {
		train := func(offload bool) *Model {
			opts := ModelOptions{Trainable: true, ModelPlacement: trainspec.ModelPlacement{Offload: offload}}
			opts.MomentShard = shard
			m := randomModel(t, rt, cfg, opts, 11)
			for range 3 {
				if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
					t.Fatal(err)
				}
				if st, err := m.Step(opt); err != nil || st.Skipped {
					t.Fatalf("step: %v, skipped %v", err, st.Skipped)
				}
			}
			return m
		}
		in, off := train(false), train(true)
		infos, err := in.Tensors()
		if err != nil {
			t.Fatal(err)
		}
		kinds := []Kind{Weight, ExpAvg, ExpAvgSq}
		if shard.World > 1 {
			kinds = kinds[:1] // a part of the moments is not read whole
		}
		for _, ti := range infos {
			for _, kind := range kinds {
				a, b := make([]float32, numel(ti.Shape)), make([]float32, numel(ti.Shape))
				if err := errors.Join(Read(in, ti.Name, kind, a), Read(off, ti.Name, kind, b)); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a, b) {
					t.Errorf("part %d of %d: %s (kind %d) differs after 3 offloaded steps", shard.Rank, shard.World, ti.Name, kind)
				}
			}
		}
	}
}
