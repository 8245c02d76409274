package torch

import (
	"os"
	"regexp"
	"strconv"
	"strings"
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

// The plugin reads the loaded libtorch's own version, and it is the one it was built for.
func TestLoadedTorchIsTheBuiltOne(t *testing.T) {
	rt := openForTest(t)
	if rt.loadedVersion == "" || minorOf(rt.loadedVersion) != minorOf(rt.TorchVersion()) {
		t.Fatalf("built against libtorch %q, loaded %q", rt.TorchVersion(), rt.loadedVersion)
	}
}

// Another minor version under the plugin is refused in one line naming both.
func TestSameTorch(t *testing.T) {
	for _, c := range []struct {
		built, loaded string
		ok            bool
	}{
		{"1.13.0", "1.13.1", true},
		{"2.6.0", "2.6.0+cu124", true},
		{"2.6.0", "", true},
		{"2.4.1", "2.6.0", false},
		{"1.13.0", "2.6.0", false},
	} {
		err := sameTorch("p.so", c.built, c.loaded)
		if (err == nil) != c.ok {
			t.Errorf("built %s, loaded %s: %v", c.built, c.loaded, err)
		}
		if err != nil && (!strings.Contains(err.Error(), c.built) || !strings.Contains(err.Error(), c.loaded) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("the error does not name both versions in one line: %v", err)
		}
	}
}
