package hfmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

// gemma3Ref is Gemma 3's text forward in float64, written from Hugging Face's
// modeling_gemma3 independently of the plugin: embedding x sqrt(hidden), per layer RMS norms
// scaling by 1 + w before and after attention and MLP, QK-norm, rotate-half RoPE at the local
// base on sliding-window layers (all but each sixth) and the global base on the others,
// GeLU-tanh MLP, tied lm_head; scores scaled by query_pre_attn_scalar^-0.5, read from
// config.json itself with Gemma3TextConfig's default of 256 where it is missing.
type gemma3Ref struct {
	s           model.Shape
	w           map[string][]float64
	queryScalar float64
}

func loadGemma3Ref(t *testing.T, dir string) gemma3Ref {
	t.Helper()
	cfg, err := model.LoadHFConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Shape()
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	q := struct {
		Scalar *float64 `json:"query_pre_attn_scalar"`
	}{}
	if err := json.Unmarshal(raw, &q); err != nil {
		t.Fatal(err)
	}
	r := gemma3Ref{s: s, w: map[string][]float64{}, queryScalar: 256}
	if q.Scalar != nil {
		r.queryScalar = *q.Scalar
	}
	for _, name := range st.Names() {
		tv, err := st.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tv.F32()
		if err != nil {
			t.Fatal(err)
		}
		r.w[name] = make([]float64, len(v))
		for i, x := range v {
			r.w[name][i] = float64(x)
		}
	}
	return r
}

// linear is x (n) times the rows of w (out x n).
func linear(w, x []float64) []float64 {
	n := len(x)
	out := make([]float64, len(w)/n)
	for o := range out {
		var sum float64
		for i, xi := range x {
			sum += w[o*n+i] * xi
		}
		out[o] = sum
	}
	return out
}

func (r gemma3Ref) rms(x, w []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+r.s.RMSEps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv * (1 + w[i])
	}
	return out
}

// rope rotates one head at position pos with base theta (HF's rotate-half pairing).
func rope(x []float64, pos int, theta float64) {
	half := len(x) / 2
	for j := range half {
		a := float64(pos) * math.Pow(theta, -float64(2*j)/float64(len(x)))
		c, s := math.Cos(a), math.Sin(a)
		x[j], x[j+half] = x[j]*c-x[j+half]*s, x[j+half]*c+x[j]*s
	}
}

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// logits returns each position's logits for the token sequence.
func (r gemma3Ref) logits(tokens []int32) [][]float64 {
	s := r.s
	H, hd, nh, nkv := s.Hidden, s.HeadDim, s.Heads, s.KVHeads
	emb := r.w["model.embed_tokens.weight"]
	xs := make([][]float64, len(tokens))
	for t, tok := range tokens {
		xs[t] = make([]float64, H)
		for i := range H {
			xs[t][i] = emb[int(tok)*H+i] * math.Sqrt(float64(H))
		}
	}
	for l := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		local := (l+1)%6 != 0
		theta, window := s.RopeTheta, len(tokens)
		if local {
			theta, window = 10000, s.SlidingWindow
		}
		qs, ks, vs := make([][]float64, len(tokens)), make([][]float64, len(tokens)), make([][]float64, len(tokens))
		for t, x := range xs {
			h := r.rms(x, r.w[p+"input_layernorm.weight"])
			qs[t], ks[t], vs[t] = linear(r.w[p+"self_attn.q_proj.weight"], h), linear(r.w[p+"self_attn.k_proj.weight"], h), linear(r.w[p+"self_attn.v_proj.weight"], h)
			for hh := range nh {
				copy(qs[t][hh*hd:], r.rms(qs[t][hh*hd:(hh+1)*hd], r.w[p+"self_attn.q_norm.weight"]))
				rope(qs[t][hh*hd:(hh+1)*hd], t, theta)
			}
			for hh := range nkv {
				copy(ks[t][hh*hd:], r.rms(ks[t][hh*hd:(hh+1)*hd], r.w[p+"self_attn.k_norm.weight"]))
				rope(ks[t][hh*hd:(hh+1)*hd], t, theta)
			}
		}
		for t := range xs {
			attn := make([]float64, nh*hd)
			for hh := range nh {
				kvh := hh / (nh / nkv)
				lo := max(0, t-window+1)
				scores := make([]float64, t+1-lo)
				mx := math.Inf(-1)
				for j := lo; j <= t; j++ {
					var d float64
					for i := range hd {
						d += qs[t][hh*hd+i] * ks[j][kvh*hd+i]
					}
					scores[j-lo] = d / math.Sqrt(r.queryScalar)
					mx = math.Max(mx, scores[j-lo])
				}
				var z float64
				for i := range scores {
					scores[i] = math.Exp(scores[i] - mx)
					z += scores[i]
				}
				for j := lo; j <= t; j++ {
					for i := range hd {
						attn[hh*hd+i] += scores[j-lo] / z * vs[j][kvh*hd+i]
					}
				}
			}
			o := r.rms(linear(r.w[p+"self_attn.o_proj.weight"], attn), r.w[p+"post_attention_layernorm.weight"])
			for i := range H {
				xs[t][i] += o[i]
			}
			h2 := r.rms(xs[t], r.w[p+"pre_feedforward_layernorm.weight"])
			g, u := linear(r.w[p+"mlp.gate_proj.weight"], h2), linear(r.w[p+"mlp.up_proj.weight"], h2)
			for i := range g {
				g[i] = geluTanh(g[i]) * u[i]
			}
			d := r.rms(linear(r.w[p+"mlp.down_proj.weight"], g), r.w[p+"post_feedforward_layernorm.weight"])
			for i := range H {
				xs[t][i] += d[i]
			}
		}
	}
	out := make([][]float64, len(tokens))
	for t, x := range xs {
		out[t] = linear(emb, r.rms(x, r.w["model.norm.weight"]))
	}
	return out
}

// The plugin's Gemma 3 forward (float32) gives the float64 reference's log-probs and
// entropies within 1e-4, over a sequence longer than the sliding window so that local and
// global layers differ.
func TestGemma3MatchesFloat64Reference(t *testing.T) {
	rt := torchtest.Open(t)
	dir := filepath.Join(testmodel.Tiny(t, "gemma3"), "hf")
	ref := loadGemma3Ref(t, dir)
	m, err := Load(rt, dir, torch.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	var seq []int32
	for i := range 24 {
		seq = append(seq, int32((i*131+7)%ref.s.Vocab))
	}
	if len(seq) <= 2*ref.s.SlidingWindow {
		t.Fatalf("sequence of %d tokens does not outrun the window of %d", len(seq), ref.s.SlidingWindow)
	}
	for _, temp := range []float64{1, 0.6} {
		if worst := refDelta(t, m, ref, seq, temp); worst > 1e-4 {
			t.Errorf("T=%v: plugin and float64 reference differ by %g", temp, worst)
		}
	}
}

// refDelta is the largest difference between the plugin's log-probs and entropies of
// seq[10:] after seq[:10] at temp and the float64 reference's.
func refDelta(t *testing.T, m *Model, ref gemma3Ref, seq []int32, temp float64) float64 {
	t.Helper()
	prompt, resp := seq[:10], seq[10:]
	{
		lp, ent, err := m.LogProbs([][]int32{prompt}, [][]int32{resp}, temp)
		if err != nil {
			t.Fatal(err)
		}
		logits := ref.logits(seq)
		var worst float64
		for j, tok := range resp {
			row := logits[len(prompt)-1+j]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, v/temp)
			}
			var z float64
			for _, v := range row {
				z += math.Exp(v/temp - mx)
			}
			lz := mx + math.Log(z)
			var h float64
			for _, v := range row {
				l := v/temp - lz
				h -= math.Exp(l) * l
			}
			worst = max(worst, math.Abs(float64(lp[0][j])-(row[tok]/temp-lz)), math.Abs(float64(ent[0][j])-h))
		}
		t.Logf("T=%v: max |delta| %.2g", temp, worst)
		return worst
	}
}

// Issue 44: Gemma 3 with query_pre_attn_scalar missing from config.json was scaled by
// head_dim (the key read as 0); transformers takes its default of 256. On the tiny model
// (head_dim 32) the plugin now matches the float64 reference, which reads the key itself,
// with the key missing, stated as 256 and stated as head_dim; missing equals 256 exactly,
// and both differ from head_dim's scaling.
func TestGemma3QueryPreAttnScalar(t *testing.T) {
	rt := torchtest.Open(t)
	tiny := filepath.Join(testmodel.Tiny(t, "gemma3"), "hf")
	var seq []int32
	for i := range 24 {
		seq = append(seq, int32((i*131+7)%200))
	}
	lps := map[string][]float32{}
	for _, c := range []struct {
		name   string
		scalar any // nil: the key removed
	}{{"missing", nil}, {"256", 256}, {"head_dim", 32}} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(tiny)); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg["head_dim"] != float64(32) {
			t.Fatalf("the tiny Gemma 3 has head_dim %v; the test needs one that is not 256", cfg["head_dim"])
		}
		delete(cfg, "query_pre_attn_scalar")
		if c.scalar != nil {
			cfg["query_pre_attn_scalar"] = c.scalar
		}
		if raw, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(rt, dir, torch.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if worst := refDelta(t, m, loadGemma3Ref(t, dir), seq, 1); worst > 1e-4 {
			t.Errorf("query_pre_attn_scalar %s: plugin and float64 reference differ by %g", c.name, worst)
		}
		lp, _, err := m.LogProbs([][]int32{seq[:10]}, [][]int32{seq[10:]}, 1)
		m.Free()
		if err != nil {
			t.Fatal(err)
		}
		lps[c.name] = lp[0]
	}
	var sameGap, headGap float64
	for j := range lps["missing"] {
		sameGap = max(sameGap, math.Abs(float64(lps["missing"][j]-lps["256"][j])))
		headGap = max(headGap, math.Abs(float64(lps["missing"][j]-lps["head_dim"][j])))
	}
	t.Logf("missing vs 256: %g; missing vs head_dim: %g", sameGap, headGap)
	if sameGap != 0 || headGap < 1e-2 {
		t.Errorf("the key missing is %g from 256 (want 0) and %g from head_dim (want > 0.01)", sameGap, headGap)
	}
}
