package torch

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/model/arch"
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
	if len(enum) != len(arch.All) || ArchCount != len(arch.All) {
		t.Fatalf("kernels/umad_torch.h has %d architectures (UMAD_ARCH_COUNT %d), the registry %d: %v",
			len(enum), ArchCount, len(arch.All), enum)
	}
	for _, d := range arch.All {
		if v, ok := enum[d.Name]; !ok || v != d.Plugin {
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
		c.SlidingWindow, c.RopeLocalTheta = d.Tiny.SlidingWindow, d.LocalRopeTheta
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
