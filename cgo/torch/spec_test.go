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

// kernelShift is 1 << the number pattern captures in a file of kernels/.
func kernelShift(t *testing.T, file, pattern string) int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(kernelSource(t, file))
	if m == nil {
		t.Fatalf("kernels/%s has no %s", file, pattern)
	}
	shift, _ := strconv.Atoi(m[1])
	return 1 << shift
}

// The plugin does not export its memory constants, so trainspec's copies, which memplan
// counts with, are checked against the kernel source.
func TestMemoryConstantsMatchKernel(t *testing.T) {
	m := regexp.MustCompile(`kOffloadChunk = (\d+) \* kAdamSlice;`).FindStringSubmatch(kernelSource(t, "umad_internal.h"))
	if m == nil {
		t.Fatal("kernels/umad_internal.h has no kOffloadChunk = N * kAdamSlice")
	}
	slicesPerChunk, _ := strconv.Atoi(m[1])
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"kKeptLogits", kernelShift(t, "umad_forward.cpp", `kKeptLogits = int64_t\(1\) << (\d+);`), trainspec.KeptLogits},
		{"pick_chunk's logits", kernelShift(t, "umad_forward.cpp", `chunk = std::max<int64_t>\(1, \(int64_t\(1\) << (\d+)\) / cfg\.vocab_size\)`), trainspec.ChunkLogits},
		{"kOffloadChunk", slicesPerChunk * kernelShift(t, "umad_internal.h", `kAdamSlice = int64_t\(1\) << (\d+);`), trainspec.OffloadChunk},
	} {
		if c.got != c.want {
			t.Errorf("the kernel's %s is %d, trainspec's %d", c.name, c.got, c.want)
		}
	}
}
