package torch

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openForTest loads the plugin; without one it skips on a developer machine and fails in CI.
func openForTest(t testing.TB) *Runtime {
	t.Helper()
	rt, err := Open(Options{Threads: 1}) // tiny models: a second thread only adds OpenMP barriers
	if errors.Is(err, ErrPluginNotFound) && os.Getenv("CI") != "true" {
		t.Skipf("no torch plugin: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// tinyConfigs are small instances of each architecture's distinguishing features.
var tinyConfigs = []struct {
	name string
	cfg  Config
}{
	{"qwen2-tied", Config{VocabSize: 97, HiddenSize: 32, IntermediateSize: 48, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RopeTheta: 1e6, RMSNormEps: 1e-6, TieEmbeddings: true, AttentionBias: true}},
	{"qwen3", Config{VocabSize: 89, HiddenSize: 32, IntermediateSize: 40, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 1, HeadDim: 16, RopeTheta: 1e6, RMSNormEps: 1e-6, QKNorm: true}},
	{"llama3-scaled", Config{VocabSize: 101, HiddenSize: 32, IntermediateSize: 64, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 4, HeadDim: 8, RopeTheta: 5e5, RMSNormEps: 1e-5,
		RopeScaling: &Llama3RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 16}}},
}

// randomModel fills every tensor with seeded random values: norms near 1, matrices with
// a scale that keeps activations O(1).
func randomModel(t testing.TB, rt *Runtime, cfg Config, opts ModelOptions, seed uint64) *Model {
	t.Helper()
	return randomModelNormShift(t, rt, cfg, opts, seed, 0)
}

// randomModelNormShift is randomModel with shift taken off every norm's weights, after their
// rounding to float32 (exact for weights near 1).
func randomModelNormShift(t testing.TB, rt *Runtime, cfg Config, opts ModelOptions, seed uint64, shift float32) *Model {
	t.Helper()
	m, err := rt.NewModel(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	infos, err := m.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, ti := range infos {
		n := int64(1)
		for _, d := range ti.Shape {
			n *= d
		}
		buf := make([]byte, 4*n)
		norm := strings.HasSuffix(ti.Name, "norm.weight")
		for i := int64(0); i < n; i++ {
			v := rng.NormFloat64()
			switch {
			case norm:
				v = 1 + 0.1*v
			case len(ti.Shape) == 2:
				v *= 1 / math.Sqrt(float64(ti.Shape[1]))
			default:
				v *= 0.1
			}
			f := float32(v)
			if norm {
				f -= shift
			}
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
		}
		if err := m.SetTensor(ti.Name, Float32, ti.Shape, buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Finalize(); err != nil {
		t.Fatal(err)
	}
	return m
}

// randomSeqs makes n prompt/response pairs of varied lengths.
func randomSeqs(rng *rand.Rand, vocab, n int) (prompts, responses [][]int32) {
	for i := 0; i < n; i++ {
		p := make([]int32, 1+rng.IntN(7))
		r := make([]int32, 1+rng.IntN(9))
		for j := range p {
			p[j] = int32(rng.IntN(vocab))
		}
		for j := range r {
			r[j] = int32(rng.IntN(vocab))
		}
		prompts, responses = append(prompts, p), append(responses, r)
	}
	return prompts, responses
}

// A missing plugin names what was looked for and how to build it.
func TestMissingPluginSaysHowToBuild(t *testing.T) {
	_, err := findPlugin("/nonexistent/libumad_torch.so")
	if !errors.Is(err, ErrPluginNotFound) || !strings.Contains(err.Error(), "cmake -S . -B build") ||
		!strings.Contains(err.Error(), "/nonexistent/libumad_torch.so") {
		t.Fatalf("got %v", err)
	}
}

// A source build's ./umad run from another directory finds build/libumad_torch.so beside
// itself (issue 28: it looked only next to itself and under the working directory).
func TestPluginFoundInBuildBesideExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(exe), "build")
	want := filepath.Join(dir, PluginName)
	if _, err := os.Stat(want); err != nil { // go test's own directory: a build/ made here
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(want, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(PluginEnv, "")
	t.Chdir(t.TempDir())
	if got, err := findPlugin(""); got != want || err != nil {
		t.Errorf("findPlugin from another directory: %q, %v; want %s", got, err, want)
	}
}
