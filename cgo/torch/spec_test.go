package torch

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// kernelSource reads a file of kernels/.
func kernelSource(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../kernels/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The plugin's LoRA target bits (UMAD_LORA_*) are trainspec.LoRATargets in order: bit i is
// target i, and the two lists have the same length.
func TestLoRATargetsMatchKernel(t *testing.T) {
	var names []string
	for _, m := range regexp.MustCompile(`UMAD_LORA_([A-Z]+) = (\d+)`).FindAllStringSubmatch(kernelSource(t, "umad_torch.h"), -1) {
		v, _ := strconv.Atoi(m[2])
		name := strings.ToLower(m[1])
		if i := slices.Index(trainspec.LoRATargets, name); i < 0 || v != 1<<i {
			t.Errorf("UMAD_LORA_%s = %d; trainspec.LoRATargets %v puts it at bit %d", m[1], v, trainspec.LoRATargets, i)
		}
		names = append(names, name)
	}
	if !slices.Equal(names, trainspec.LoRATargets) {
		t.Errorf("plugin targets %v, trainspec.LoRATargets %v", names, trainspec.LoRATargets)
	}
}

// The plugin does not export its chunking constants, so trainspec's copies, which memplan
// counts with, are checked against the kernel source.
func TestMemoryConstantsMatchKernel(t *testing.T) {
	src := kernelSource(t, "umad_torch.cpp")
	for _, c := range []struct {
		pattern string
		want    int
	}{
		{`kKeptLogits = int64_t\(1\) << (\d+);`, trainspec.KeptLogits},
		{`chunk = std::max<int64_t>\(1, \(int64_t\(1\) << (\d+)\) / cfg\.vocab_size\)`, trainspec.ChunkLogits},
	} {
		m := regexp.MustCompile(c.pattern).FindStringSubmatch(src)
		if m == nil {
			t.Errorf("kernels/umad_torch.cpp has no %s", c.pattern)
			continue
		}
		if shift, _ := strconv.Atoi(m[1]); 1<<shift != c.want {
			t.Errorf("kernel's %s is 1<<%d, trainspec has %d", c.pattern, shift, c.want)
		}
	}
}
