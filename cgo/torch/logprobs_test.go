package torch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// maxRelDiff is the largest |a-b| / max(1, |b|): float32 log-probs near -8 are a few ulps
// (1e-6 each) apart whenever two summation orders differ.
func maxRelDiff(a, b [][]float32) float64 {
	d := 0.0
	for i := range a {
		for j := range a[i] {
			x, y := float64(a[i][j]), float64(b[i][j])
			d = math.Max(d, math.Abs(x-y)/math.Max(1, math.Abs(y)))
		}
	}
	return d
}

// tolerance per parameter dtype: float64 shows that only rounding separates the two paths,
// float32 that the production dtype stays within 1e-6 relative.
var tolerance = map[DType]float64{Float64: 1e-12, Float32: 1e-6}

// Packing must not leak attention across sequences: each sequence scored alone gives the
// same log-probs and entropies as inside a packed batch.
func TestLogProbsPackedMatchesOneAtATime(t *testing.T) {
	rt := openForTest(t)
	for _, tc := range tinyConfigs {
		for _, dt := range []DType{Float64, Float32} {
			t.Run(fmt.Sprintf("%s/f%d", tc.name, 8*dt.Size()), func(t *testing.T) {
				m := randomModel(t, rt, tc.cfg, ModelOptions{DType: dt}, 11)
				prompts, responses := randomSeqs(rand.New(rand.NewPCG(3, 4)), tc.cfg.VocabSize, 6)
				lp, ent, err := m.LogProbs(prompts, responses, 0.6)
				if err != nil {
					t.Fatal(err)
				}
				for i := range prompts {
					lp1, ent1, err := m.LogProbs(prompts[i:i+1], responses[i:i+1], 0.6)
					if err != nil {
						t.Fatal(err)
					}
					if d := maxRelDiff(lp[i:i+1], lp1); d > tolerance[dt] {
						t.Errorf("sequence %d: packed vs alone log-probs differ by %g", i, d)
					}
					if d := maxRelDiff(ent[i:i+1], ent1); d > tolerance[dt] {
						t.Errorf("sequence %d: packed vs alone entropies differ by %g", i, d)
					}
				}
			})
		}
	}
}

// The chunked lm_head (custom autograd function) must agree with materialising all logits.
func TestLogProbsChunkedMatchesMaterialised(t *testing.T) {
	rt := openForTest(t)
	for _, tc := range tinyConfigs {
		for _, dt := range []DType{Float64, Float32} {
			t.Run(fmt.Sprintf("%s/f%d", tc.name, 8*dt.Size()), func(t *testing.T) {
				chunked := randomModel(t, rt, tc.cfg, ModelOptions{DType: dt, LogitChunk: 3}, 5)
				full, err := chunked.Clone(ModelOptions{DType: dt, LogitChunk: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer full.Free()
				prompts, responses := randomSeqs(rand.New(rand.NewPCG(8, 9)), tc.cfg.VocabSize, 5)
				lpC, entC, err := chunked.LogProbs(prompts, responses, 0.7)
				if err != nil {
					t.Fatal(err)
				}
				lpF, entF, err := full.LogProbs(prompts, responses, 0.7)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxRelDiff(lpC, lpF); d > tolerance[dt] {
					t.Errorf("log-probs differ by %g", d)
				}
				if d := maxRelDiff(entC, entF); d > tolerance[dt] {
					t.Errorf("entropies differ by %g", d)
				}
			})
		}
	}
}

// Scoring every vocabulary token after one prompt enumerates the whole distribution at
// temperature T: it must sum to 1 and its entropy must be what the plugin reports.
func TestLogProbsAreTheTemperatureScaledDistribution(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	m := randomModel(t, rt, cfg, ModelOptions{DType: Float64}, 2)
	prompt := []int32{5, 17, 3}
	for _, temp := range []float64{0.3, 0.6, 1, 2} {
		var prompts, responses [][]int32
		for v := 0; v < cfg.VocabSize; v++ {
			prompts = append(prompts, prompt)
			responses = append(responses, []int32{int32(v)})
		}
		lp, ent, err := m.LogProbs(prompts, responses, temp)
		if err != nil {
			t.Fatal(err)
		}
		sum, h := 0.0, 0.0
		for v := range lp {
			p := math.Exp(float64(lp[v][0]))
			sum += p
			h -= p * float64(lp[v][0])
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("T=%g: probabilities sum to %g", temp, sum)
		}
		if math.Abs(h-float64(ent[0][0])) > 1e-5 {
			t.Errorf("T=%g: entropy %g, enumerated %g", temp, ent[0][0], h)
		}
	}
}

func TestLogProbsRejectsBadInput(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	m := randomModel(t, rt, cfg, ModelOptions{}, 2)
	cases := []struct {
		name               string
		prompts, responses [][]int32
		temp               float64
		want               string
	}{
		{"token beyond vocabulary", [][]int32{{1, 2}}, [][]int32{{int32(cfg.VocabSize)}}, 1, "outside the vocabulary"},
		{"negative token", [][]int32{{-1}}, [][]int32{{2}}, 1, "outside the vocabulary"},
		{"empty prompt has nothing to predict the first token", [][]int32{{}}, [][]int32{{2}}, 1, "empty prompt"},
		{"prompt/response count mismatch", [][]int32{{1}, {2}}, [][]int32{{2}}, 1, "2 prompts but 1 responses"},
		{"zero temperature", [][]int32{{1}}, [][]int32{{2}}, 0, "temperature"},
		{"empty batch", nil, nil, 1, "empty batch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := m.LogProbs(tc.prompts, tc.responses, tc.temp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
