package torch

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestABIVersionMatchesHeader(t *testing.T) {
	b, err := os.ReadFile("../../kernels/umad_torch.h")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define UMAD_TORCH_ABI_VERSION (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("kernels/umad_torch.h defines no UMAD_TORCH_ABI_VERSION")
	}
	if v, _ := strconv.Atoi(string(m[1])); v != abiVersion {
		t.Fatalf("kernels/umad_torch.h has ABI version %d, cgo/torch/abi.go %d: bump abiVersion with the header", v, abiVersion)
	}
}
