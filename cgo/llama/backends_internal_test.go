package llama

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// findBackend runs the start-up search against dir and returns what it found.
func findBackend(t *testing.T, dir string) []Backend {
	t.Helper()
	Init()
	t.Setenv(BackendsEnv, dir)
	// Test binaries record no dependencies: stand in the version go.mod pins.
	saveVersion := ggmlVersion
	ggmlVersion = func() string { return pinnedGGML(t) }
	t.Cleanup(func() { ggmlVersion = saveVersion })
	saved := backends.found
	backends.found = nil
	t.Cleanup(func() { backends.found = saved })
	loadBackends()
	return backends.found
}

// pinnedGGML is the ggml module version go.mod requires.
func pinnedGGML(t *testing.T) string {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == ggmlModule {
			return f[1]
		}
	}
	t.Fatal("go.mod does not require " + ggmlModule)
	return ""
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNoBackendLibraryMeansCPUOnly(t *testing.T) {
	if got := findBackend(t, t.TempDir()); len(got) != 0 {
		t.Fatalf("found %v in an empty directory", got)
	}
	devs := Devices()
	if len(devs) == 0 || devs[0].Kind != "cpu" {
		t.Fatalf("devices %+v: want the CPU first", devs)
	}
	if GPUCount() != 0 {
		t.Fatalf("GPU count %d without a GPU backend", GPUCount())
	}
}

// A library from another ggml, or one with no manifest, is refused before it is loaded:
// loading it could crash on changed function tables.
func TestBackendFromAnotherGGMLIsRefused(t *testing.T) {
	for name, manifest := range map[string]string{
		"no manifest":    "",
		"other version":  `{"module": "github.com/ollama/ollama", "version": "v0.0.1"}`,
		"corrupt":        `{"module": `,
		"another module": `{"module": "example.com/ggml", "version": "` + pinnedGGML(t) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			// Not a library at all: a refused manifest must stop the search before dlopen.
			writeFile(t, filepath.Join(dir, cudaLibrary), "not an ELF file")
			if manifest != "" {
				writeFile(t, filepath.Join(dir, manifestFile), manifest)
			}
			got := findBackend(t, dir)
			if len(got) != 1 || got[0].Loaded || got[0].Problem == "" {
				t.Fatalf("got %+v, want one refused library", got)
			}
			if !strings.Contains(got[0].Problem, "ggml-cuda.json") && !strings.Contains(got[0].Problem, "built from") {
				t.Errorf("reason %q does not say what is wrong with the library", got[0].Problem)
			}
			if GPUCount() != 0 {
				t.Error("a refused library added a GPU")
			}
		})
	}
}

// A library that matches but cannot load (here: not ELF, no base library) is a warning,
// and the CPU remains.
func TestUnloadableBackendFallsBackToCPU(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, cudaLibrary), "not an ELF file")
	writeFile(t, filepath.Join(dir, manifestFile), `{"module": "github.com/ollama/ollama", "version": "`+pinnedGGML(t)+`"}`)
	got := findBackend(t, dir)
	if len(got) != 1 || got[0].Loaded || !strings.Contains(got[0].Problem, baseLibrary) {
		t.Fatalf("got %+v, want a failure naming %s", got, baseLibrary)
	}
	if len(Devices()) == 0 {
		t.Fatal("no devices left after a failed load")
	}
}

// The real library, when ./build.sh cuda has built it: on a machine without a GPU it must
// fail with ggml's reason and leave the CPU.
func TestBuiltCUDABackendWithoutGPU(t *testing.T) {
	dir, _ := filepath.Abs("../../build/cuda")
	if _, err := os.Stat(filepath.Join(dir, cudaLibrary)); err != nil {
		t.Skip("build/cuda has no libggml-cuda.so (./build.sh cuda builds it, about 30 min on 2 cores)")
	}
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has a GPU: bench/gpu.sh checks the loaded backend there")
	}
	got := findBackend(t, dir)
	if len(got) != 1 || got[0].Loaded {
		t.Fatalf("got %+v, want the library found and not loaded", got)
	}
	t.Logf("without a GPU: %s", got[0].Problem)
	if GPUCount() != 0 {
		t.Fatal("a GPU appeared on a machine without one")
	}
}

// Naming a device that is not a GPU here fails before llama.cpp sees it.
func TestUnknownDeviceRefused(t *testing.T) {
	Init()
	for _, name := range []string{"CUDA0", "CPU", ""} {
		_, err := gpuDevices([]string{name})
		if err == nil || !strings.Contains(err.Error(), "no GPU backend is loaded") {
			t.Errorf("device %q: got %v, want a refusal saying no GPU backend is loaded", name, err)
		}
	}
	_, err := LoadModel(testmodel.GGUF(t, "qwen2"), ModelParams{GPULayers: 99, Devices: []string{"CUDA0"}})
	if err == nil || !strings.Contains(err.Error(), `device "CUDA0"`) {
		t.Errorf("loading on an unknown device: got %v", err)
	}
}
