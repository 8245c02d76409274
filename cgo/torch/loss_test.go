package torch

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// lossFixture is a float64 model and two sequences whose old log-probs are set so each
// response token has a chosen ratio r = pi/pi_old.
type lossFixture struct {
	m                  *Model
	prompts, responses [][]int32
	logp               [][]float32 // current log-probs at temperature 1
}

func newLossFixture(t *testing.T, opts ModelOptions) lossFixture {
	t.Helper()
	rt := openForTest(t)
	opts.DType = Float64
	m := randomModel(t, rt, tinyConfigs[0].cfg, opts, 21)
	f := lossFixture{m: m, prompts: [][]int32{{3, 9, 4}, {7}}, responses: [][]int32{{10, 11, 12}, {20, 21, 22}}}
	var err error
	if f.logp, _, err = m.LogProbs(f.prompts, f.responses, 1); err != nil {
		t.Fatal(err)
	}
	return f
}

// withRatios returns old log-probs that make each token's ratio the given value.
func (f lossFixture) withRatios(r [][]float64) [][]float32 {
	old := make([][]float32, len(r))
	for i := range r {
		for j := range r[i] {
			old[i] = append(old[i], float32(float64(f.logp[i][j])-math.Log(r[i][j])))
		}
	}
	return old
}

// Per-token losses by hand (clip 0.2, dual clip 3):
//
//	r=1.5 A=+1: max(-1.5, -1.2)            = -1.2  clipped above
//	r=0.5 A=+1: max(-0.5, -0.8)            = -0.5  not clipped (the min side of PPO)
//	r=0.5 A=-1: max( 0.5,  0.8)            =  0.8  clipped below
//	r=4   A=-1: min(max(4, 1.2), 3)        =  3    dual clip
//	r=1.1 A=-2: max( 2.2,  2.2)            =  2.2  inside the trust region
//	r=5   A=+1, mask 0                     =  excluded
var (
	handRatios = [][]float64{{1.5, 0.5, 0.5}, {4, 1.1, 5}}
	handAdv    = [][]float32{{1, 1, -1}, {-1, -2, 1}}
	handMask   = [][]float32{{1, 1, 1}, {1, 1, 0}}
)

func TestPolicyLossHandComputed(t *testing.T) {
	f := newLossFixture(t, ModelOptions{})
	base := trainspec.LossConfig{Temperature: 1, ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3}
	cases := []struct {
		name          string
		cfg           func(trainspec.LossConfig) trainspec.LossConfig
		isw           [][]float32
		want          float64
		clip, clipLow float64
	}{
		{"token-mean: (-1.2-0.5+0.8+3+2.2)/5", func(c trainspec.LossConfig) trainspec.LossConfig { return c }, nil, 4.3 / 5, 0.4, 0.2},
		{"seq-mean-token-sum: (-0.9+5.2)/2", func(c trainspec.LossConfig) trainspec.LossConfig { c.Agg = trainspec.SeqMeanTokenSum; return c }, nil, 2.15, 0.4, 0.2},
		{"seq-mean-token-mean: (-0.3+2.6)/2", func(c trainspec.LossConfig) trainspec.LossConfig { c.Agg = trainspec.SeqMeanTokenMean; return c }, nil, 1.15, 0.4, 0.2},
		{"seq-mean-token-sum-norm over the longest response (3)", func(c trainspec.LossConfig) trainspec.LossConfig { c.Agg = trainspec.SeqMeanTokenSumNorm; return c }, nil, 4.3 / 3, 0.4, 0.2},
		{"seq-mean-token-sum-norm over a constant 10", func(c trainspec.LossConfig) trainspec.LossConfig {
			c.Agg = trainspec.SeqMeanTokenSumNorm
			c.NormLength = 10
			return c
		}, nil, 0.43, 0.4, 0.2},
		{"no dual clip: the r=4 token costs 4", func(c trainspec.LossConfig) trainspec.LossConfig { c.ClipC = 0; return c }, nil, 5.3 / 5, 0.4, 0},
		{"clip-higher 0.6 lets r=1.5 through", func(c trainspec.LossConfig) trainspec.LossConfig { c.ClipHigh = 0.6; return c }, nil, 4.0 / 5, 0.2, 0.2},
		{"importance weights scale token losses", func(c trainspec.LossConfig) trainspec.LossConfig { return c }, [][]float32{{2, 1, 1}, {1, 0.5, 7}}, 2.0 / 5, 0.4, 0.2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := f.m.PolicyLoss(PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(handRatios),
				Advantages: handAdv, Mask: handMask, ISWeights: tc.isw}, tc.cfg(base), false, 1)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.Loss-tc.want) > 1e-5 || math.Abs(st.PGLoss-tc.want) > 1e-5 {
				t.Errorf("loss %g, pg loss %g, want %g", st.Loss, st.PGLoss, tc.want)
			}
			if math.Abs(st.ClipFrac-tc.clip) > 1e-9 || math.Abs(st.ClipFracLower-tc.clipLow) > 1e-9 {
				t.Errorf("clip fractions %g/%g, want %g/%g", st.ClipFrac, st.ClipFracLower, tc.clip, tc.clipLow)
			}
			if st.Tokens != 5 {
				t.Errorf("%d tokens in the loss, want 5 (one masked)", st.Tokens)
			}
		})
	}
}

// KL-in-loss and entropy bonus add coef * aggregate to the policy term; the per-token KL
// estimators match their formulas at log p - log q = 0.5.
func TestPolicyLossKLAndEntropyTerms(t *testing.T) {
	f := newLossFixture(t, ModelOptions{})
	_, ent, err := f.m.LogProbs(f.prompts, f.responses, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([][]float32, len(f.logp))
	for i := range f.logp {
		for _, v := range f.logp[i] {
			ref[i] = append(ref[i], v-0.5)
		}
	}
	ones := [][]float64{{1, 1, 1}, {1, 1, 1}}
	d := 0.5
	for _, tc := range []struct {
		est    trainspec.KLEstimator
		perTok float64
	}{
		{trainspec.KLK1, d},
		{trainspec.KLK2, d * d / 2},
		{trainspec.KLK3, math.Exp(-d) + d - 1},
	} {
		t.Run(string(tc.est), func(t *testing.T) {
			cfg := trainspec.LossConfig{Temperature: 1, ClipLow: 0.2, ClipHigh: 0.2, KL: tc.est, KLCoef: 0.1, EntropyCoef: 0.01}
			st, err := f.m.PolicyLoss(PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(ones),
				Advantages: handAdv, RefLogp: ref}, cfg, false, 1)
			if err != nil {
				t.Fatal(err)
			}
			meanEnt := 0.0
			for _, s := range ent {
				for _, v := range s {
					meanEnt += float64(v) / 6
				}
			}
			if math.Abs(st.KL-tc.perTok) > 1e-6 {
				t.Errorf("KL %g, want %g", st.KL, tc.perTok)
			}
			if math.Abs(st.Entropy-meanEnt) > 1e-5 {
				t.Errorf("entropy %g, want %g", st.Entropy, meanEnt)
			}
			if want := st.PGLoss + 0.1*tc.perTok - 0.01*meanEnt; math.Abs(st.Loss-want) > 1e-5 {
				t.Errorf("loss %g, want pg + 0.1 KL - 0.01 H = %g", st.Loss, want)
			}
			kl, err := f.m.rt.KL([]float32{-1}, []float32{-1.5}, tc.est)
			if err != nil || math.Abs(float64(kl[0])-tc.perTok) > 1e-6 {
				t.Errorf("per-token KL %v (%v), want %g", kl, err, tc.perTok)
			}
		})
	}
}

// The analytic gradient of the policy loss (chunked lm_head backward, recomputed or from the
// kept log-softmax, checkpointed layers, every aggregation and KL estimator) matches central
// finite differences in float64.
func TestPolicyLossGradientFiniteDifference(t *testing.T) {
	t.Run("recomputed", func(t *testing.T) {
		policyLossFD(t, newLossFixture(t, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LogitChunk: 2}))
	})
	t.Run("kept", func(t *testing.T) {
		policyLossFD(t, newLossFixture(t, ModelOptions{Trainable: true, ModelPlacement: checkpointed}))
	})
}

func policyLossFD(t *testing.T, f lossFixture) {
	ratios := [][]float64{{1.05, 0.7, 1.5}, {4, 0.95, 1.2}} // away from the clip kinks
	ref := make([][]float32, 2)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range f.logp {
		for _, v := range f.logp[i] {
			ref[i] = append(ref[i], v+float32(rng.NormFloat64()*0.3))
		}
	}
	batch := PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(ratios),
		Advantages: [][]float32{{0.8, 0.8, -1.3}, {-0.5, 1.1, 1.1}}, RefLogp: ref,
		ISWeights: [][]float32{{1, 0.7, 1}, {1, 1, 0.9}}}
	probe := []struct {
		name string
		idx  int
	}{
		{"model.embed_tokens.weight", 3*32 + 5}, // tied: embedding and lm_head paths
		{"model.layers.0.self_attn.q_proj.bias", 7},
		{"model.layers.0.self_attn.k_proj.weight", 40},
		{"model.layers.1.mlp.down_proj.weight", 100},
		{"model.layers.1.input_layernorm.weight", 2},
		{"model.norm.weight", 9},
	}
	for _, tc := range []struct {
		agg trainspec.AggMode
		kl  trainspec.KLEstimator
	}{
		{trainspec.TokenMean, trainspec.KLK1}, {trainspec.TokenMean, trainspec.KLK3}, {trainspec.SeqMeanTokenSum, trainspec.KLK2}, {trainspec.SeqMeanTokenMean, trainspec.KLK3},
		{trainspec.SeqMeanTokenSumNorm, trainspec.KLK1}, {trainspec.SeqMeanTokenSumNorm, trainspec.KLK2},
	} {
		t.Run(string(tc.agg)+"/"+string(tc.kl), func(t *testing.T) {
			cfg := trainspec.LossConfig{Temperature: 0.6, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 3, Agg: tc.agg,
				KL: tc.kl, KLCoef: 0.2, EntropyCoef: 0.05}
			if _, err := f.m.PolicyLoss(batch, cfg, true, 1); err != nil {
				t.Fatal(err)
			}
			for _, p := range probe {
				checkGradFD(t, f.m, p.name, p.idx, policyLoss(t, f.m, batch, cfg))
			}
			if err := f.m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// policyLoss is the loss of batch under cfg, computed without gradients.
func policyLoss(t *testing.T, m *Model, batch PolicyBatch, cfg trainspec.LossConfig) func() float64 {
	return func() float64 {
		st, err := m.PolicyLoss(batch, cfg, false, 1)
		if err != nil {
			t.Fatal(err)
		}
		return st.Loss
	}
}

// checkGradFD compares the gradient already computed for element idx of the weight name
// with a central finite difference of loss (which must not accumulate gradients), then
// restores the weight. A zero gradient proves nothing and fails too.
func checkGradFD(t *testing.T, m *Model, name string, idx int, loss func() float64) {
	t.Helper()
	grad, w := tensorBuf(t, m, name), tensorBuf(t, m, name)
	if err := Read(m, name, Grad, grad); err != nil {
		t.Fatal(err)
	}
	if err := Read(m, name, Weight, w); err != nil {
		t.Fatal(err)
	}
	const h = 1e-5
	at := func(delta float64) float64 {
		w2 := slices.Clone(w)
		w2[idx] += delta
		if err := Write(m, name, Weight, w2); err != nil {
			t.Fatal(err)
		}
		return loss()
	}
	fd := (at(h) - at(-h)) / (2 * h)
	if err := Write(m, name, Weight, w); err != nil {
		t.Fatal(err)
	}
	an := grad[idx]
	if math.Abs(fd-an) > 1e-7+1e-5*math.Abs(an) {
		t.Errorf("%s[%d]: analytic %.10g, finite difference %.10g", name, idx, an, fd)
	}
	if an == 0 {
		t.Errorf("%s[%d]: zero gradient proves nothing", name, idx)
	}
}

func tensorBuf(t *testing.T, m *Model, name string) []float64 {
	t.Helper()
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range infos {
		if ti.Name == name {
			n := int64(1)
			for _, d := range ti.Shape {
				n *= d
			}
			return make([]float64, n)
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil
}

// Checkpointing and chunking change memory, not results: gradients agree with the plain
// path to float64 rounding, whether the chunks' log-softmax is recomputed or kept.
func TestGradCheckpointAndChunkingKeepGradients(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[1].cfg // qwen3: q/k norms inside the recomputed layer
	plain := randomModel(t, rt, cfg, ModelOptions{DType: Float64, Trainable: true, LogitChunk: -1}, 4)
	ckpt := randomModel(t, rt, cfg, ModelOptions{DType: Float64, Trainable: true, ModelPlacement: checkpointed, LogitChunk: 2}, 4)
	kept := randomModel(t, rt, cfg, ModelOptions{DType: Float64, Trainable: true}, 4)
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(5, 5)), cfg.VocabSize, 4)
	for _, m := range []*Model{plain, ckpt, kept} {
		if _, err := m.SFTLoss(prompts, responses, true, 1); err != nil {
			t.Fatal(err)
		}
	}
	infos, _ := plain.Tensors()
	for _, ti := range infos {
		a := tensorBuf(t, plain, ti.Name)
		if err := Read(plain, ti.Name, Grad, a); err != nil {
			t.Fatal(err)
		}
		for _, other := range []struct {
			name string
			m    *Model
		}{{"checkpointed+chunked", ckpt}, {"kept log-softmax", kept}} {
			b := tensorBuf(t, other.m, ti.Name)
			if err := Read(other.m, ti.Name, Grad, b); err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if math.Abs(a[i]-b[i]) > 1e-12+1e-9*math.Abs(a[i]) {
					t.Fatalf("%s[%d]: plain %g, %s %g", ti.Name, i, a[i], other.name, b[i])
				}
			}
		}
	}
}

func TestPolicyLossRejectsBadInput(t *testing.T) {
	f := newLossFixture(t, ModelOptions{})
	ok := PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.logp, Advantages: handAdv}
	cfg := trainspec.LossConfig{Temperature: 1, ClipLow: 0.2, ClipHigh: 0.2}
	cases := []struct {
		name  string
		batch func(PolicyBatch) PolicyBatch
		cfg   func(trainspec.LossConfig) trainspec.LossConfig
		back  bool
		want  string
	}{
		{"KL coefficient without reference log-probs", nil, func(c trainspec.LossConfig) trainspec.LossConfig { c.KLCoef = 0.1; return c }, false, "reference log-probs is required"},
		{"advantages missing", func(b PolicyBatch) PolicyBatch { b.Advantages = nil; return b }, nil, false, "advantages is required"},
		{"per-token length mismatch", func(b PolicyBatch) PolicyBatch { b.Mask = [][]float32{{1}, {1, 1, 1}}; return b }, nil, false, "mask of sequence 0 has 1 values for 3"},
		{"unknown aggregation", nil, func(c trainspec.LossConfig) trainspec.LossConfig { c.Agg = "sum"; return c }, false, "unknown loss aggregation"},
		{"unknown estimator", nil, func(c trainspec.LossConfig) trainspec.LossConfig { c.KL = "k4"; return c }, false, "unknown KL estimator"},
		{"dual clip at or below 1", nil, func(c trainspec.LossConfig) trainspec.LossConfig { c.ClipC = 1; return c }, false, "dual clip"},
		{"backward through a frozen model", nil, nil, true, "frozen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, c := ok, cfg
			if tc.batch != nil {
				b = tc.batch(b)
			}
			if tc.cfg != nil {
				c = tc.cfg(c)
			}
			_, err := f.m.PolicyLoss(b, c, tc.back, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
