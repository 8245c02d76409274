package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/trainlog"
)

// StableBest stops once the best has held for patience tries, and not before minTries.
func TestStableBest(t *testing.T) {
	times := []float64{5, 4, 3, 3, 3.1, 3, 3, 2, 2, 2}
	tries := 0
	best, err := StableBest(func() (float64, error) { tries++; return times[tries-1], nil }, 2, 3, len(times))
	if err != nil || best != 3 || tries != 6 {
		t.Errorf("best %g after %d tries (%v), want 3 after 6 (3 tries without a 1%% gain after the first 3)", best, tries, err)
	}
	tries = 0
	best, _ = StableBest(func() (float64, error) { tries++; return times[tries-1], nil }, 8, 3, len(times))
	if best != 2 || tries != 10 {
		t.Errorf("with minTries 8: best %g after %d tries, want 2 after 10", best, tries)
	}
}

// The section gives each figure as min / median / max over the runs, and a phase above its
// run's matmul peak is an error that names it.
func TestTrainSection(t *testing.T) {
	run := func(update, peak float64) TrainStep {
		m := trainlog.StepMetrics{Step: 2, Tokens: 100, PromptTokens: 100, RolloutTokensPerSec: 1000}
		m.Times.Rollout, m.Times.LogProbs, m.Times.Reference, m.Times.Update, m.Times.Step = 1, 0.1, 0.1, update, 2
		return TrainStep{Metrics: m, Step: 2, MatmulShape: "8 x 8 by 8 x 8", DType: "f32", PeakFLOPS: peak, Bandwidth: 1e10,
			MatmulParams: 1e6, RolloutBytes: 4e6, ParallelSeqs: 8, PeakRSS: 1 << 30,
			Plan: &memplan.Plan{Baseline: memplan.Baseline}}
	}
	// update: 6N FLOPs x 200 tokens = 1.2 GFLOP (no lm_head); at 0.5 s and a 4 GFLOP/s
	// peak, 60%.
	body, err := TrainSection([]TrainStep{run(0.5, 4e9), run(0.4, 4e9), run(0.6, 4e9)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| update | 0.4000 / 0.5000 / 0.6000 |", "| 50% / 60% / 75% |", "over 3 runs", "matmul peak: 4 GFLOP/s ("} {
		if !strings.Contains(body, want) {
			t.Errorf("the section lacks %q:\n%s", want, body)
		}
	}
	// The lm_head multiplies the response tokens only: with half the weights in it, the
	// log-probs' forward is 2 x (0.5M x 200 + 0.5M x 100) = 0.3 GFLOP, 75% of the peak in 0.1 s.
	head := run(0.5, 4e9)
	head.HeadParams = 5e5
	if body, err = TrainSection([]TrainStep{head}); err != nil || !strings.Contains(body, "| log-probs | 0.1000 | 5% | 2000 | 3 GFLOP/s | 75% |") {
		t.Errorf("the lm_head's FLOPs on the response tokens: %v\n%s", err, body)
	}
	_, err = TrainSection([]TrainStep{run(0.5, 4e9), run(0.2, 4e9)})
	if err == nil || !strings.Contains(err.Error(), "update at 150% of its run's peak 4 GFLOP/s") {
		t.Errorf("a phase at 150%% of the peak: %v", err)
	}
}

// The triad's arrays are mapped and returned; it measures a positive, finite rate.
func TestTriadBandwidth(t *testing.T) {
	f := hugeFloats(1 << 20)
	for i := range f {
		f[i] = float64(i)
	}
	if f[len(f)-1] != float64(len(f)-1) {
		t.Fatal("mapped floats do not hold their values")
	}
	unmapFloats(f)
	unmapFloats(make([]float64, 8)) // a heap slice: left alone
	if bw := TriadBandwidth(3 << 22); !(bw > 0) || math.IsInf(bw, 0) {
		t.Errorf("triad bandwidth %g B/s", bw)
	}
}
