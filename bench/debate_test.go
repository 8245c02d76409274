package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		if len(f.Rates) != tc.engines || f.Rates[0].PrefillTokS <= 0 || f.Rates[0].DecodeTokS <= 0 || f.Efficiency <= 0 {
			t.Errorf("bare rates %+v, efficiency %g", f.Rates, f.Efficiency)
		}
		if s := f.String(); !strings.Contains(s, "| efficiency |") || strings.Count(s, "\n| model.gguf |") != tc.engines {
			t.Errorf("table:\n%s", s)
		}
	}
}
