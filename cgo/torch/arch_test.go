package torch

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
)

// The registry's plugin codes of the architectures these tests name.
var (
	ArchQwen2 = pluginCode(arch.Qwen2)
	ArchQwen3 = pluginCode(arch.Qwen3)
	ArchLlama = pluginCode(arch.Llama)
)

func pluginCode(name string) Arch {
	d, err := arch.Lookup(name)
	if err != nil {
		panic(err) // a registry without the architecture the tests were written for
	}
	return Arch(d.Plugin)
}

// TestArchCodesMatchKernel checks that the registry's plugin codes are the C enum's: the
// same names, the same values, the same count, so the forward the plugin runs is the one
// the descriptor names.
func TestArchCodesMatchKernel(t *testing.T) {
	h, err := os.ReadFile("../../kernels/umad_torch.h")
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]int32{}
	for _, m := range regexp.MustCompile(`UMAD_ARCH_([A-Z0-9]+) = (\d+)`).FindAllStringSubmatch(string(h), -1) {
		v, _ := strconv.Atoi(m[2])
		enum[strings.ToLower(m[1])] = int32(v)
	}
	codes := map[int32]bool{} // an architecture the plugin runs as another shares its code
	for _, d := range arch.All {
		codes[d.Plugin] = true
	}
	if len(enum) != len(codes) || ArchCount != len(codes) {
		t.Fatalf("kernels/umad_torch.h has %d architectures (UMAD_ARCH_COUNT %d), the registry %d codes: %v",
			len(enum), ArchCount, len(codes), enum)
	}
	for _, d := range arch.All {
		// An architecture llama.cpp runs as another may have no code of its own.
		if v, ok := enum[d.Name]; ok && v != d.Plugin || !ok && d.GGUF == "" {
			t.Errorf("%s: registry code %d, kernel UMAD_ARCH_%s = %d (present %v)", d.Name, d.Plugin, strings.ToUpper(d.Name), v, ok)
		}
	}
}

// TestPluginRefusesUnknownArch checks the kernel's range check against the registry: every
// descriptor's code builds a model, the next code is refused.
func TestPluginRefusesUnknownArch(t *testing.T) {
	rt := openForTest(t)
	cfg := tinyConfigs[0].cfg
	for _, d := range arch.All {
		c := cfg
		c.Arch, c.AttentionBias, c.QKNorm = Arch(d.Plugin), d.QKVBias, d.QKNorm
		c.EmbedScale, c.SlidingWindowPattern, c.SlidingWindow, c.RopeLocalTheta = d.EmbedScale, d.SlidingWindowPattern, d.Tiny.SlidingWindow, d.LocalRopeTheta
		m, err := rt.NewModel(c, ModelOptions{})
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		m.Free()
	}
	cfg.Arch = Arch(len(arch.All))
	if m, err := rt.NewModel(cfg, ModelOptions{}); err == nil {
		m.Free()
		t.Fatalf("architecture code %d: want an error", cfg.Arch)
	} else if !strings.Contains(err.Error(), "unknown architecture code") {
		t.Fatalf("architecture code %d: %v", cfg.Arch, err)
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
