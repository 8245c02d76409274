package engine_test

import (
	"math"
	"path/filepath"
	"testing"

	archreg "github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/sampler"
)

// The libtorch plugin on the Hugging Face side of a tiny model and llama.cpp on its GGUF
// side give the same log-probs and entropies (F32 KV cache, flash attention off): mean
// |delta| <= 1e-5 and max <= 1e-4, with and without temperature. GeLU models (Gemma 3) get
// 1e-4 and 1e-3: llama.cpp's CPU GeLU rounds its input to fp16 for a table lookup
// (GGML_GELU_FP16 in ggml-cpu/vec.h); the plugin's exactness there is checked against a
// float64 forward (hfmodel's TestGemma3MatchesFloat64Reference).
func TestCrossEngineAgreement(t *testing.T) {
	rt := torchtest.Open(t)
	for _, arch := range archs {
		meanTol, maxTol := 1e-5, 1e-4
		if d, _ := archreg.Lookup(arch); d.Activation != "silu" {
			meanTol, maxTol = 1e-4, 1e-3
		}
		m := load(t, arch)
		tm, err := hfmodel.Load(rt, filepath.Join(testmodel.Tiny(t, arch), "hf"), torch.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Responses sampled from the model itself, plus one of arbitrary tokens.
		var prompts, responses [][]int32
		for i, q := range []string{"What is 2 + 2?", "Name a prime number."} {
			p := prompt(t, m, q)
			res, _ := run(t, m, exact(2), []engine.Request{{ID: 1, Prompt: p, K: 2, MaxTokens: 20,
				Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: uint64(i)}})
			for _, s := range res[1].Samples {
				prompts, responses = append(prompts, p), append(responses, s.Tokens)
			}
		}
		prompts, responses = append(prompts, []int32{5, 6, 7}), append(responses, []int32{300, 12, 601, 44, 44, 9})
		sc := engine.NewScorer(m, engine.ScorerParams{KVType: engine.KVF32, FlashAttn: engine.FlashOff})
		for _, temp := range []float64{1, 0.6} {
			lpL, entL, err := sc.LogProbs(prompts, responses, temp)
			if err != nil {
				t.Fatal(err)
			}
			lpT, entT, err := tm.LogProbs(prompts, responses, temp)
			if err != nil {
				t.Fatal(err)
			}
			var sum, worst float64
			n := 0
			for i := range lpL {
				for j := range lpL[i] {
					for _, d := range []float64{float64(lpL[i][j] - lpT[i][j]), float64(entL[i][j] - entT[i][j])} {
						sum += math.Abs(d)
						worst = max(worst, math.Abs(d))
						n++
					}
				}
			}
			mean := sum / float64(n)
			t.Logf("%s T=%v: %d values, mean |delta| %.2g, max %.2g", arch, temp, n, mean, worst)
			if mean > meanTol || worst > maxTol {
				t.Errorf("%s T=%v: llama.cpp and libtorch differ: mean %g, max %g", arch, temp, mean, worst)
			}
		}
		sc.Free()
		tm.Free()
	}
}
