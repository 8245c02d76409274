package torch

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
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

// abiTokens are kernels/umad_torch.h's C tokens without its comments, its line breaks and
// the version's own #define, one space apart: what a struct, enum or entry point declares,
// and not how it is laid out or explained.
func abiTokens(header string) string {
	header = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`).ReplaceAllString(header, " ")
	header = regexp.MustCompile(`(?m)^#define UMAD_TORCH_ABI_VERSION .*$`).ReplaceAllString(header, " ")
	header = strings.ReplaceAll(header, "\\\n", " ")
	return strings.Join(regexp.MustCompile(`[A-Za-z0-9_.]+|\S`).FindAllString(header, -1), " ")
}

// abiDigest is the sha256 of abiTokens, in hex.
func abiDigest(header string) string {
	sum := sha256.Sum256([]byte(abiTokens(header)))
	return hex.EncodeToString(sum[:])
}

// abiDigests reads kernels/umad_torch.abi: each ABI version with the digest of the header's
// declarations it was released with, oldest first.
func abiDigests(t *testing.T) (versions []int, digests []string) {
	t.Helper()
	f, err := os.Open("../../kernels/umad_torch.abi")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var v int
		var d string
		if _, err := fmt.Sscanf(line, "%d %s", &v, &d); err != nil {
			t.Fatalf("kernels/umad_torch.abi: %q: %v", line, err)
		}
		versions, digests = append(versions, v), append(digests, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return versions, digests
}

// TestABIDigest keeps the header's declarations and its version together: a change to a
// struct, an enum or an entry point changes the digest, and the header's version must then
// be a new last line of kernels/umad_torch.abi. Two branches that bump to the same version
// both append that line, and their merge conflicts there.
func TestABIDigest(t *testing.T) {
	b, err := os.ReadFile("../../kernels/umad_torch.h")
	if err != nil {
		t.Fatal(err)
	}
	got := abiDigest(string(b))
	versions, digests := abiDigests(t)
	if len(versions) == 0 {
		t.Fatal("kernels/umad_torch.abi lists no version")
	}
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] || digests[i] == digests[i-1] {
			t.Errorf("kernels/umad_torch.abi: version %d after %d: versions go up, and each has new declarations", versions[i], versions[i-1])
		}
	}
	last, want := versions[len(versions)-1], digests[len(digests)-1]
	switch {
	case last != abiVersion:
		t.Errorf("kernels/umad_torch.abi ends at version %d, the header is at %d: append \"%d %s\"", last, abiVersion, abiVersion, got)
	case got != want:
		t.Errorf("kernels/umad_torch.h's declarations changed (digest %s) under ABI version %d (digest %s): bump UMAD_TORCH_ABI_VERSION and abiVersion to %d and append \"%d %s\" to kernels/umad_torch.abi", got, abiVersion, want, abiVersion+1, abiVersion+1, got)
	}
}

// Comments, spacing and line breaks leave the digest as it is; a changed field does not.
func TestABIDigestNormalises(t *testing.T) {
	a := "/* the config */\ntypedef struct c {\n  int32_t a; /* a */\n  int64_t* b;\n} c;\n#define UMAD_TORCH_ABI_VERSION 3\n#define L(X) \\\n  X(a)\n"
	b := "// the config, again\ntypedef struct c { int32_t a;\n int64_t *b; } c;\n#define UMAD_TORCH_ABI_VERSION 4\n#define L(X) X(a)\n"
	if abiDigest(a) != abiDigest(b) {
		t.Errorf("layout changed the digest:\n%s\n%s", abiTokens(a), abiTokens(b))
	}
	if c := strings.Replace(b, "int32_t a", "int64_t a", 1); abiDigest(c) == abiDigest(b) {
		t.Error("a field's type did not change the digest")
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

// The loaded libtorch's version is read from its file: Debian's versioned file name (through
// the .so link), pip's torch/version.py beside torch/lib; anything else is unknown.
func TestLibraryVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) string {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deb := write("debian/libtorch_cpu.so.2.6.0", "")
	if err := os.Symlink(deb, filepath.Join(dir, "debian", "libtorch_cpu.so")); err != nil {
		t.Fatal(err)
	}
	pip := write("site/torch/lib/libtorch_cpu.so", "")
	write("site/torch/version.py", "from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n")
	bare := write("bare/lib/libtorch_cpu.so", "")
	badpy := write("badpy/torch/lib/libtorch_cpu.so", "")
	write("badpy/torch/version.py", "version = 2\n")
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "debian", "libtorch_cpu.so"), "2.6.0"},
		{deb, "2.6.0"},
		{pip, "2.11.0+cu130"},
		{bare, ""},
		{badpy, ""},
		{filepath.Join(dir, "missing", "libtorch_cpu.so"), ""},
		{"", ""},
	} {
		if got := libraryVersion(c.path); got != c.want {
			t.Errorf("libraryVersion(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// libtorch's OpenBLAS runs the kernels chosen by the CPU's features (or the user's
// OPENBLAS_CORETYPE), not the SSE3 fallback 0.3.21 takes on CPUs it does not know by model.
func TestOpenBLASKernelsByFeatures(t *testing.T) {
	rt := openForTest(t)
	core := rt.BLASCore()
	if core == "" {
		t.Skip("libtorch's BLAS is not OpenBLAS")
	}
	if want := os.Getenv(openBLASCoreEnv); !strings.EqualFold(core, want) {
		t.Errorf("OpenBLAS runs %s kernels, OPENBLAS_CORETYPE is %q", core, want)
	}
	if cpu.X86.HasAVX2 && strings.EqualFold(core, "Prescott") {
		t.Errorf("OpenBLAS runs its SSE3 kernels on a CPU with AVX2")
	}
}
