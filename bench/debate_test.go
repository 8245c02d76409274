package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/sampler"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

// The debate measurement counts every generation and token of the run, on one engine for
// two agents of one model and on two engines for two models, and times the bare loop.
func TestDebateCountsTheWork(t *testing.T) {
	one := testmodel.GGUF(t, "qwen2")
	two := filepath.Join(testmodel.TinySeed(t, "qwen2", 2), "model.gguf")
	for _, tc := range []struct {
		agents  []string
		engines int
	}{{[]string{one, one}, 1}, {[]string{one, two}, 2}} {
		f, err := Debate(DebateConfig{Agents: tc.agents, Problems: 2, K: 2, Turns: 2, MaxTokens: 4, PromptLimit: 400,
			Slots: 4, Threads: 1, Params: sampler.Params{Temperature: 1, TopP: 1}, Repeats: 1})
		if err != nil {
			t.Fatal(err)
		}
		// 2 problems x 2 agents x 2 trajectories x 2 turns, none stopped.
		if f.Engines != tc.engines || f.Generations != 16 || len(f.Walls) != 1 {
			t.Fatalf("%d engines, %d generations, %d runs; want %d, 16, 1", f.Engines, f.Generations, len(f.Walls), tc.engines)
		}
		if f.GeneratedTokens < 16 || f.GeneratedTokens > 16*4 {
			t.Errorf("%d generated tokens, want 16 to 64", f.GeneratedTokens)
		}
		// Turn 0 decodes each agent's prompt once for its 2 trajectories.
		if f.PromptTokens <= 0 || f.PromptTokens >= f.NaivePromptTokens {
			t.Errorf("%d prompt tokens decoded of %d naive, want fewer", f.PromptTokens, f.NaivePromptTokens)
		}
		if len(f.Rates) != tc.engines || f.Rates[0].PrefillTokS <= 0 || f.Rates[0].DecodeTokS <= 0 || f.Efficiency <= 0 ||
			f.MeanDepthEfficiency <= 0 || f.Speedup <= 0 {
			t.Errorf("bare rates %+v, efficiencies %g (positions), %g (mean depth), %g (naive)", f.Rates, f.Efficiency,
				f.MeanDepthEfficiency, f.Speedup)
		}
		for _, r := range f.Rates {
			if r.Prefill.Base+r.Prefill.PerPos <= 0 || r.Decode.Base+r.Decode.PerPos <= 0 {
				t.Errorf("%s: cost models prefill %+v, decode %+v", r.Model, r.Prefill, r.Decode)
			}
		}
		// Sharing leaves fewer prompt tokens to price than every sample's whole prompt.
		if f.BareNaive <= f.Bare {
			t.Errorf("bare time %v for the prompts decoded, %v for the naive prompts", f.Bare, f.BareNaive)
		}
		if s := f.String(); !strings.Contains(s, "| efficiency |") || strings.Count(s, "\n| model.gguf |") != tc.engines {
			t.Errorf("table:\n%s", s)
		}
	}
}

// fitCost recovers the line through two timings, and a noisy pair cannot give a negative
// cost per position.
func TestFitCost(t *testing.T) {
	want := CostModel{Base: 4e-6, PerPos: 1e-7}
	at := func(lo, hi int) (time.Duration, int64, int64) {
		n, p := int64(hi-lo), positionSum(lo, hi)
		return seconds(want.time(n, p)), n, p
	}
	if got := positionSum(3, 6); got != 3+4+5 {
		t.Fatalf("positionSum(3, 6) = %d", got)
	}
	t1, n1, p1 := at(0, 300)
	t2, n2, p2 := at(364, 664)
	got := fitCost(t1, n1, p1, t2, n2, p2)
	if math.Abs(got.Base-want.Base) > 1e-9 || math.Abs(got.PerPos-want.PerPos) > 1e-11 {
		t.Errorf("fit %+v, want %+v", got, want)
	}
	if got := fitCost(t2, n1, p1, t1, n2, p2); got.PerPos != 0 || got.Base <= 0 {
		t.Errorf("deeper tokens timed faster: fit %+v, want no slope and a positive base", got)
	}
}
