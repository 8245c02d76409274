package torch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// The plugin finds a policy loss by name; one it does not have is refused in one line that
// names the ones it has.
func TestPolicyLossByName(t *testing.T) {
	f := newLossFixture(t, ModelOptions{})
	b := PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(handRatios), Advantages: handAdv, Mask: handMask}
	cfg := trainspec.LossConfig{Temperature: 1, ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3}
	byDefault, err := f.m.PolicyLoss(b, cfg, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Loss = trainspec.LossPPO
	if named, err := f.m.PolicyLoss(b, cfg, false, 1); err != nil || named.Loss != byDefault.Loss {
		t.Errorf("ppo by name: %v, %v; by default %v", named.Loss, err, byDefault.Loss)
	}
	cfg.Loss = "nope"
	_, err = f.m.PolicyLoss(b, cfg, false, 1)
	if err == nil || !strings.Contains(err.Error(), `unknown policy loss "nope" (this plugin has ppo`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown loss: %v", err)
	}
}

// lossRatios are lossBatch's ratios.
var lossRatios = [][]float64{{1.05, 0.7, 1.5}, {4, 0.95, 1.2}}

// lossBatch is the micro-batch of the tests of the losses after ppo: ratios (at temperature
// 1) inside and on both sides of a 0.2/0.28 clip range, away from its kinks, advantages and
// importance weights that vary within a sequence, one token masked out, and reference
// log-probs for the KL term.
func lossBatch(f lossFixture) PolicyBatch {
	rng := rand.New(rand.NewPCG(1, 1))
	ref := make([][]float32, len(f.logp))
	for i := range f.logp {
		for _, v := range f.logp[i] {
			ref[i] = append(ref[i], v+float32(rng.NormFloat64()*0.3))
		}
	}
	return PolicyBatch{Prompts: f.prompts, Responses: f.responses, OldLogp: f.withRatios(lossRatios),
		Advantages: [][]float32{{0.8, 0.8, -1.3}, {-0.5, 1.1, 1.1}}, ISWeights: [][]float32{{1, 0.7, 1}, {1, 1, 0.9}},
		Mask: [][]float32{{1, 1, 1}, {1, 1, 0}}, RefLogp: ref}
}

// fdProbe are weights whose gradients the finite-difference tests check: every kind of
// tensor of the tied Qwen2 fixture.
var fdProbe = []struct {
	name string
	idx  int
}{
	{"model.embed_tokens.weight", 3*32 + 5},
	{"model.layers.0.self_attn.q_proj.bias", 7},
	{"model.layers.0.self_attn.k_proj.weight", 40},
	{"model.layers.1.mlp.down_proj.weight", 100},
	{"model.layers.1.input_layernorm.weight", 2},
	{"model.norm.weight", 9},
}

// GSPO's gradient is the derivative of its loss, through the sequence's mean log-ratio, with
// every aggregation, the KL and entropy terms and importance weights that vary within a
// sequence (under which GSPO's straight-through per-token form would differ).
func TestGSPOGradientFiniteDifference(t *testing.T) {
	f := newLossFixture(t, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LogitChunk: 2})
	b := lossBatch(f)
	for _, tc := range []struct {
		agg trainspec.AggMode
		kl  trainspec.KLEstimator
	}{{trainspec.SeqMeanTokenMean, trainspec.KLK3}, {trainspec.TokenMean, trainspec.KLK1}, {trainspec.SeqMeanTokenSum, trainspec.KLK2}, {trainspec.SeqMeanTokenSumNorm, trainspec.KLK3}} {
		t.Run(string(tc.agg), func(t *testing.T) {
			cfg := trainspec.LossConfig{Loss: trainspec.LossGSPO, Temperature: 1, ClipLow: 0.2, ClipHigh: 0.28, Agg: tc.agg, KL: tc.kl, KLCoef: 0.2, EntropyCoef: 0.05}
			if _, err := f.m.PolicyLoss(b, cfg, true, 1); err != nil {
				t.Fatal(err)
			}
			for _, p := range fdProbe {
				checkGradFD(t, f.m, p.name, p.idx, policyLoss(t, f.m, b, cfg))
			}
			if err := f.m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// GSPO's loss, clip fraction and gradient equal the paper's formula computed directly here
// (float64 from the plugin's log-probs): s_i = exp(mean_t log r_it), loss_it =
// max(-A s_i, -A clip(s_i)) times the importance weight, aggregated.
func TestGSPOMatchesDirectFormula(t *testing.T) {
	f := newLossFixture(t, ModelOptions{Trainable: true})
	b := lossBatch(f)
	b.RefLogp = nil
	for _, agg := range []trainspec.AggMode{trainspec.SeqMeanTokenMean, trainspec.TokenMean} {
		t.Run(string(agg), func(t *testing.T) {
			cfg := trainspec.LossConfig{Loss: trainspec.LossGSPO, Temperature: 1, ClipLow: 0.2, ClipHigh: 0.28, Agg: agg}
			w := aggWeights(agg, b.Mask, cfg.NormLength)
			var want, clipped, tokens float64
			c := make([][]float64, len(f.logp))
			for i, lp := range f.logp {
				var sum, n float64
				for j := range lp {
					sum += float64(b.Mask[i][j]) * (float64(lp[j]) - float64(b.OldLogp[i][j]))
					n += float64(b.Mask[i][j])
				}
				s := math.Exp(sum / math.Max(n, 1))
				var dLds float64 // d loss / d s_i
				for j := range lp {
					a, u := float64(b.Advantages[i][j]), float64(b.ISWeights[i][j])
					l1, l2 := -a*s, -a*min(max(s, 1-cfg.ClipLow), 1+cfg.ClipHigh)
					want += w[i][j] * u * max(l1, l2)
					if l2 > l1 {
						clipped += float64(b.Mask[i][j])
					} else {
						dLds -= w[i][j] * u * a
					}
					tokens += float64(b.Mask[i][j])
				}
				for j := range lp {
					c[i] = append(c[i], dLds*s*float64(b.Mask[i][j])/math.Max(n, 1))
				}
			}
			checkDirect(t, f, b, cfg, want, clipped/tokens, c)
		})
	}
}

// aggWeights are d aggregate / d x_t of each token under an aggregation mode.
func aggWeights(agg trainspec.AggMode, mask [][]float32, norm float64) [][]float64 {
	var all float64
	for _, row := range mask {
		for _, m := range row {
			all += float64(m)
		}
	}
	w := make([][]float64, len(mask))
	for i, row := range mask {
		var seq float64
		for _, m := range row {
			seq += float64(m)
		}
		div := map[trainspec.AggMode]float64{trainspec.TokenMean: all, trainspec.SeqMeanTokenSum: float64(len(mask)), trainspec.SeqMeanTokenMean: seq * float64(len(mask)),
			trainspec.SeqMeanTokenSumNorm: norm}[agg]
		for _, m := range row {
			w[i] = append(w[i], float64(m)/div)
		}
	}
	return w
}

// checkDirect compares the plugin's loss of b under cfg with want, its clip fraction with
// clip, and its gradient with sum_t c_t d logp_t / d params: the gradient that the
// formula's derivatives c_t in each token's log-prob imply, computed by a second libtorch
// path, the ppo loss at ratio 1 (old log-probs = the current ones, advantage -c_t, each
// token's loss summed), whose gradient is then sum_t c_t d logp_t.
func checkDirect(t *testing.T, f lossFixture, b PolicyBatch, cfg trainspec.LossConfig, want, clip float64, c [][]float64) {
	t.Helper()
	if err := f.m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	st, err := f.m.PolicyLoss(b, cfg, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.Loss-want) > 1e-6*(1+math.Abs(want)) || st.PGLoss != st.Loss {
		t.Errorf("loss %.10g (pg %.10g), direct formula %.10g", st.Loss, st.PGLoss, want)
	}
	if math.Abs(st.ClipFrac-clip) > 1e-12 {
		t.Errorf("clip fraction %g, direct formula %g", st.ClipFrac, clip)
	}
	got := allGrads(t, f.m)
	neg := make([][]float32, len(c))
	for i := range c {
		for _, v := range c[i] {
			neg[i] = append(neg[i], float32(-v))
		}
	}
	if err := f.m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	ref := PolicyBatch{Prompts: b.Prompts, Responses: b.Responses, OldLogp: f.logp, Advantages: neg}
	if _, err := f.m.PolicyLoss(ref, trainspec.LossConfig{Temperature: cfg.Temperature, ClipLow: 0.2, ClipHigh: 0.2, Agg: trainspec.SeqMeanTokenSumNorm, NormLength: 1}, true, 1); err != nil {
		t.Fatal(err)
	}
	var any float64
	for name, g := range allGrads(t, f.m) {
		var scale float64
		for _, v := range g {
			scale = math.Max(scale, math.Abs(v))
		}
		any = math.Max(any, scale)
		for i := range g {
			if math.Abs(got[name][i]-g[i]) > 1e-5*scale+1e-12 {
				t.Errorf("%s[%d]: gradient %.10g, direct formula %.10g", name, i, got[name][i], g[i])
				break
			}
		}
	}
	if any == 0 {
		t.Error("a zero gradient proves nothing")
	}
	if err := f.m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
}

// allGrads reads every gradient of m.
func allGrads(t *testing.T, m *Model) map[string][]float64 {
	t.Helper()
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, ti := range infos {
		g := tensorBuf(t, m, ti.Name)
		if err := Read(m, ti.Name, Grad, g); err != nil {
			t.Fatal(err)
		}
		out[ti.Name] = g
	}
	return out
}

// CISPO's gradient is not the derivative of its loss, whose weight is held (a
// stop-gradient), but it is the derivative of a sum of two plugin losses: over the tokens
// whose weight is not clipped, -A r (ppo with an unreachable clip, d r = r d log pi), and
// over those whose weight is clipped, CISPO's own -A w log pi (w constant there). With an
// aggregation that is linear in the mask, the KL and entropy terms split the same way.
func TestCISPOGradientFiniteDifference(t *testing.T) {
	f := newLossFixture(t, ModelOptions{Trainable: true, ModelPlacement: checkpointed, LogitChunk: 2})
	b := lossBatch(f)
	for _, agg := range []trainspec.AggMode{trainspec.SeqMeanTokenSumNorm, trainspec.SeqMeanTokenSum} {
		t.Run(string(agg), func(t *testing.T) {
			cfg := trainspec.LossConfig{Loss: trainspec.LossCISPO, Temperature: 1, ClipLow: 0.2, ClipHigh: 0.28, Agg: agg, NormLength: 4,
				KL: trainspec.KLK3, KLCoef: 0.2, EntropyCoef: 0.05}
			free, held := b, b
			free.Mask, held.Mask = make([][]float32, len(b.Mask)), make([][]float32, len(b.Mask))
			for i, row := range b.Mask {
				for j, m := range row {
					clipped := lossRatios[i][j] < 1-cfg.ClipLow || lossRatios[i][j] > 1+cfg.ClipHigh
					free.Mask[i] = append(free.Mask[i], m*float32(b2f(!clipped)))
					held.Mask[i] = append(held.Mask[i], m*float32(b2f(clipped)))
				}
			}
			unclipped := cfg
			unclipped.Loss, unclipped.ClipLow, unclipped.ClipHigh = trainspec.LossPPO, 0.99, 1e6
			split := func() float64 {
				return policyLoss(t, f.m, free, unclipped)() + policyLoss(t, f.m, held, cfg)()
			}
			if _, err := f.m.PolicyLoss(b, cfg, true, 1); err != nil {
				t.Fatal(err)
			}
			for _, p := range fdProbe {
				checkGradFD(t, f.m, p.name, p.idx, split)
			}
			if err := f.m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// CISPO's loss, clip fraction and gradient equal MiniMax-M1's formula computed directly
// here (float64 from the plugin's log-probs): loss_t = -sg(clip(r_t)) A_t log pi_t times the
// importance weight, aggregated; d loss / d log pi_t = -clip(r_t) A_t times the weights.
func TestCISPOMatchesDirectFormula(t *testing.T) {
	f := newLossFixture(t, ModelOptions{Trainable: true})
	b := lossBatch(f)
	b.RefLogp = nil
	for _, tc := range []struct {
		low, high float64
		agg       trainspec.AggMode
	}{{1, 0.28, trainspec.TokenMean}, {0.2, 0.28, trainspec.TokenMean}, {0.2, 0.28, trainspec.SeqMeanTokenMean}} {
		t.Run(fmt.Sprintf("%g/%g/%s", tc.low, tc.high, tc.agg), func(t *testing.T) {
			cfg := trainspec.LossConfig{Loss: trainspec.LossCISPO, Temperature: 1, ClipLow: tc.low, ClipHigh: tc.high, Agg: tc.agg}
			w := aggWeights(tc.agg, b.Mask, cfg.NormLength)
			var want, clipped, tokens float64
			c := make([][]float64, len(f.logp))
			for i, lp := range f.logp {
				for j := range lp {
					r := math.Exp(float64(lp[j]) - float64(b.OldLogp[i][j]))
					weight := min(max(r, 1-tc.low), 1+tc.high)
					coef := -w[i][j] * float64(b.ISWeights[i][j]) * weight * float64(b.Advantages[i][j])
					want += coef * float64(lp[j])
					c[i] = append(c[i], coef)
					clipped += float64(b.Mask[i][j]) * b2f(weight != r)
					tokens += float64(b.Mask[i][j])
				}
			}
			checkDirect(t, f, b, cfg, want, clipped/tokens, c)
		})
	}
}
