package torch

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
)

// registryConfig is cfg with the traits of the registry's descriptor d, as hfmodel sets them.
func registryConfig(t *testing.T, cfg Config, d arch.Desc) Config {
	t.Helper()
	act, err := ActivationNamed(d.Activation)
	if err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	cfg.Activation, cfg.NormOffset, cfg.SandwichNorm, cfg.EmbedScale = act, d.NormOffset, d.SandwichNorm, d.EmbedScale
	cfg.AttentionBias, cfg.QKNorm = d.QKVBias, d.QKNorm
	if d.SlidingWindowPattern > 0 {
		cfg.SlidingWindowPattern, cfg.SlidingWindow, cfg.RopeLocalTheta = d.SlidingWindowPattern, d.Tiny.SlidingWindow, d.LocalRopeTheta
	}
	return cfg
}

// Every descriptor of the registry is a set of traits the plugin has, on any shape: its
// activation has a plugin code, and its traits build a model on each test shape (a Gemma 3
// on Llama 3's shape and RoPE scaling too), sandwich norms with their tensors.
func TestRegistryTraitsBuildModels(t *testing.T) {
	rt := openForTest(t)
	for _, d := range arch.All {
		for _, tc := range tinyConfigs {
			cfg := registryConfig(t, tc.cfg, d)
			m := randomModel(t, rt, cfg, ModelOptions{}, 1)
			infos, err := m.Tensors()
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, ti := range infos {
				names[ti.Name] = true
			}
			if got := names["model.layers.0.pre_feedforward_layernorm.weight"] && names["model.layers.0.post_feedforward_layernorm.weight"]; got != d.SandwichNorm {
				t.Errorf("%s traits on %s: sandwich norms' tensors %v, want %v", d.Name, tc.name, got, d.SandwichNorm)
			}
			if _, _, err := m.LogProbs([][]int32{{1, 2, 3}}, [][]int32{{4, 5}}, 1); err != nil {
				t.Errorf("%s traits on %s: %v", d.Name, tc.name, err)
			}
			m.Free()
		}
	}
}

// The forward reads each trait from the configuration, whatever architecture the shape came
// from. On Llama 3's shape and weights: norms offset by 1 over weights 1 less are the same
// model, bit for bit; a query scalar equal to head_dim is no scalar; GeLU-tanh, sandwich
// norms, another query scalar and the embedding's scale each change the log-probs.
func TestTraitsDecideTheForward(t *testing.T) {
	rt := openForTest(t)
	base := tinyConfigs[2].cfg
	prompts, responses := randomSeqs(rand.New(rand.NewPCG(5, 5)), base.VocabSize, 3)
	logprobs := func(m *Model) [][]float32 {
		t.Helper()
		lp, _, err := m.LogProbs(prompts, responses, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lp
	}
	want := logprobs(randomModel(t, rt, base, ModelOptions{}, 9))
	same := func(a, b [][]float32) bool { return slices.EqualFunc(a, b, slices.Equal[[]float32]) }
	offset := base
	offset.NormOffset = 1
	if got := logprobs(randomModelNormShift(t, rt, offset, ModelOptions{}, 9, 1)); !same(got, want) {
		t.Errorf("norm offset 1 over weights 1 less: %v, want %v", got, want)
	}
	scalar := base
	scalar.QueryScalar = float64(base.HeadDim)
	if got := logprobs(randomModel(t, rt, scalar, ModelOptions{}, 9)); !same(got, want) {
		t.Errorf("query scalar = head_dim: %v, want %v", got, want)
	}
	for name, change := range map[string]func(*Config){
		"gelu_tanh":    func(c *Config) { c.Activation = GeLUTanh },
		"sandwich":     func(c *Config) { c.SandwichNorm = true },
		"query scalar": func(c *Config) { c.QueryScalar = 3 },
		"embed scale":  func(c *Config) { c.EmbedScale = true },
	} {
		cfg := base
		change(&cfg)
		if got := logprobs(randomModel(t, rt, cfg, ModelOptions{}, 9)); same(got, want) {
			t.Errorf("%s: the log-probs of the plain model", name)
		}
	}
}

// A trait the plugin does not have is an error that names it, from Go and from the plugin.
func TestBadTraitsAreRefused(t *testing.T) {
	if _, err := ActivationNamed("relu"); err == nil || !strings.Contains(err.Error(), `activation "relu"`) {
		t.Errorf("ActivationNamed(relu): %v", err)
	}
	rt := openForTest(t)
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Activation = 7 }, "unknown activation code 7"},
		{func(c *Config) { c.NormOffset = math.Inf(1) }, "offset must be finite"},
		{func(c *Config) { c.QueryScalar = -1 }, "query_pre_attn_scalar must be"},
		{func(c *Config) { c.QueryScalar = math.NaN() }, "query_pre_attn_scalar must be"},
	} {
		cfg := tinyConfigs[2].cfg
		c.change(&cfg)
		m, err := rt.NewModel(cfg, ModelOptions{})
		if err == nil {
			m.Free()
			t.Errorf("%s: no error", c.want)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// The sliding-window layers are data of the model's configuration, not of the architecture
// code: on a Qwen3 model, a pattern of 1 (every layer global) is no pattern, and a pattern
// of 2 with a window of 2 changes the log-probs of a longer sequence. A pattern without its
// window or local RoPE base, or a negative one, is refused.
func TestSlidingWindowPatternFromConfig(t *testing.T) {
	rt := openForTest(t)
	logprobs := func(pattern, window int) []float32 {
		cfg := tinyConfigs[1].cfg
		cfg.SlidingWindowPattern, cfg.SlidingWindow = pattern, window
		if pattern > 0 {
			cfg.RopeLocalTheta = 1e4
		}
		m := randomModel(t, rt, cfg, ModelOptions{}, 3)
		defer m.Free()
		lp, _, err := m.LogProbs([][]int32{{1, 2, 3}}, [][]int32{{4, 5, 6, 7}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lp[0]
	}
	global := logprobs(0, 0)
	if got := logprobs(1, 2); !slices.Equal(got, global) {
		t.Errorf("pattern 1 (every layer global): %v, no pattern %v", got, global)
	}
	if got := logprobs(2, 2); slices.Equal(got, global) {
		t.Errorf("pattern 2, window 2: the log-probs of 7 tokens are those of global attention, %v", got)
	}
	for _, c := range []struct {
		pattern, window int
		theta           float64
	}{{2, 0, 1e4}, {2, 2, 0}, {-1, 2, 1e4}} {
		cfg := tinyConfigs[1].cfg
		cfg.SlidingWindowPattern, cfg.SlidingWindow, cfg.RopeLocalTheta = c.pattern, c.window, c.theta
		m, err := rt.NewModel(cfg, ModelOptions{})
		if err == nil {
			m.Free()
			t.Errorf("pattern %d, window %d, local base %g: want an error", c.pattern, c.window, c.theta)
		} else if !strings.Contains(err.Error(), "sliding-window pattern") {
			t.Errorf("pattern %d, window %d, local base %g: %v", c.pattern, c.window, c.theta, err)
		}
	}
}
