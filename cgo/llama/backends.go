package llama

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "ggml-backend.h"
ggml_backend_reg_t umad_backend_load(const char *path, const char *base, char *err, size_t errlen);
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"unsafe"
)

// GPU backends: ggml's CUDA backend is a separate library (./build.sh cuda writes
// build/cuda/libggml-cuda.so, its libggml-base.so.0 and ggml-cuda.json) loaded once at
// start; the binary itself stays CPU-only and portable (docs/ARCHITECTURE.md section 3).

// BackendsEnv names a directory holding backend libraries; it replaces the default search
// (next to the binary, then its build/cuda).
const BackendsEnv = "UMAD_GGML_BACKENDS"

const (
	cudaLibrary  = "libggml-cuda.so"
	baseLibrary  = "libggml-base.so.0"
	manifestFile = "ggml-cuda.json"
	ggmlModule   = "github.com/ollama/ollama"
)

// Backend is a backend library that was found, and what became of it.
type Backend struct {
	Path   string `json:"path"`
	Loaded bool   `json:"loaded"`
	// Problem says why a library that was found is not in use ("" when loaded).
	Problem string `json:"problem,omitempty"`
}

var backends struct {
	found []Backend
}

// manifest is ggml-cuda.json: what ./build.sh cuda built the library from.
type manifest struct {
	Key     string `json:"key"`
	Module  string `json:"module"`
	Version string `json:"version"`
}

// backendDirs is where backend libraries are looked for.
func backendDirs() []string {
	if d := os.Getenv(BackendsEnv); d != "" {
		return []string{d}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	return []string{dir, filepath.Join(dir, "build", "cuda")}
}

// ggmlVersion is the version of the ggml module compiled into this binary ("" when the
// build records no dependencies, as test binaries do); a variable so tests can set it.
var ggmlVersion = func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == ggmlModule {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// checkManifest refuses a library built from another ggml than the binary's: ollama's
// patches change backend function tables without changing ggml's version, so a mismatch
// would crash instead of failing.
func checkManifest(dir, want string) error {
	if want == "" {
		return errors.New("this binary does not record which ggml it was built from")
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return fmt.Errorf("no %s beside it to say which ggml it was built from (rebuild with ./build.sh cuda)", manifestFile)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %v", manifestFile, err)
	}
	if m.Module != ggmlModule || m.Version != want {
		return fmt.Errorf("built from %s %s, this binary has %s %s (rebuild with ./build.sh cuda)", m.Module, m.Version, ggmlModule, want)
	}
	return nil
}

// loadBackends loads the first CUDA backend library found, after checking its manifest.
// Failures are warnings: umad then runs on the CPU.
func loadBackends() {
	want := ggmlVersion()
	for _, dir := range backendDirs() {
		lib := filepath.Join(dir, cudaLibrary)
		if _, err := os.Stat(lib); err != nil {
			continue
		}
		b := Backend{Path: lib}
		if err := checkManifest(dir, want); err != nil {
			b.Problem = err.Error()
		} else if err := loadLibrary(lib, filepath.Join(dir, baseLibrary)); err != nil {
			b.Problem = err.Error()
		} else {
			b.Loaded = true
		}
		if !b.Loaded {
			slog.Warn("GPU backend not used, running on the CPU", "library", lib, "reason", b.Problem)
		}
		backends.found = append(backends.found, b)
		return
	}
}

// loadLibrary loads a backend library; a library that loads but finds no device (no GPU,
// no driver) counts as a failure with ggml's own reason.
func loadLibrary(lib, base string) error {
	clib, cbase := C.CString(lib), C.CString(base)
	defer C.free(unsafe.Pointer(clib))
	defer C.free(unsafe.Pointer(cbase))
	var msg [512]C.char
	takeLastError()
	reg := C.umad_backend_load(clib, cbase, &msg[0], C.size_t(len(msg)))
	if reg == nil {
		return errors.New(firstNonEmpty(takeLastError(), C.GoString(&msg[0])))
	}
	if C.ggml_backend_reg_dev_count(reg) == 0 {
		return errors.New(firstNonEmpty(takeLastError(), "the backend found no device"))
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// Backends lists the backend libraries found at start and whether each is in use.
func Backends() []Backend {
	Init()
	return append([]Backend{}, backends.found...)
}

// Device is a compute device ggml can run on.
type Device struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Kind        string `json:"kind"` // cpu, gpu, igpu or accel
	FreeBytes   uint64 `json:"free_bytes"`
	TotalBytes  uint64 `json:"total_bytes"`
	// ComputeMajor.ComputeMinor is a CUDA device's compute capability (0.0 otherwise).
	ComputeMajor int `json:"compute_major"`
	ComputeMinor int `json:"compute_minor"`
}

// Devices lists every device of every loaded backend, the CPU included.
func Devices() []Device {
	Init()
	n := int(C.ggml_backend_dev_count())
	out := make([]Device, 0, n)
	for i := range n {
		d := C.ggml_backend_dev_get(C.size_t(i))
		var p C.struct_ggml_backend_dev_props
		C.ggml_backend_dev_get_props(d, &p)
		out = append(out, Device{
			Name: C.GoString(p.name), Description: C.GoString(p.description),
			Kind: deviceKind(p._type), FreeBytes: uint64(p.memory_free), TotalBytes: uint64(p.memory_total),
			ComputeMajor: int(p.compute_major), ComputeMinor: int(p.compute_minor),
		})
	}
	return out
}

// GPUCount is the number of GPU devices (integrated ones included).
func GPUCount() int {
	n := 0
	for _, d := range Devices() {
		if d.Kind == "gpu" || d.Kind == "igpu" {
			n++
		}
	}
	return n
}

// CheckDevices refuses names that are not GPUs here (umad env lists them).
func CheckDevices(names []string) error {
	var known []string
	for _, d := range Devices() {
		if d.Kind == "gpu" || d.Kind == "igpu" {
			known = append(known, d.Name)
		}
	}
	for _, name := range names {
		if slices.Contains(known, name) {
			continue
		}
		if len(known) == 0 {
			return fmt.Errorf("device %q: no GPU backend is loaded (see umad env)", name)
		}
		return fmt.Errorf("device %q is not a GPU here; the GPUs are %s", name, strings.Join(known, ", "))
	}
	return nil
}

// gpuDevices resolves GPU names to the NULL-terminated device list llama.cpp's model
// parameters take; the caller frees it after loading.
func gpuDevices(names []string) (*C.ggml_backend_dev_t, error) {
	if err := CheckDevices(names); err != nil {
		return nil, err
	}
	list := (*[1 << 16]C.ggml_backend_dev_t)(C.malloc(C.size_t(len(names)+1) * C.size_t(unsafe.Sizeof(C.ggml_backend_dev_t(nil)))))
	for i, name := range names {
		cname := C.CString(name)
		list[i] = C.ggml_backend_dev_by_name(cname)
		C.free(unsafe.Pointer(cname))
	}
	list[len(names)] = nil
	return &list[0], nil
}

func deviceKind(t C.enum_ggml_backend_dev_type) string {
	switch t {
	case C.GGML_BACKEND_DEVICE_TYPE_CPU:
		return "cpu"
	case C.GGML_BACKEND_DEVICE_TYPE_GPU:
		return "gpu"
	case C.GGML_BACKEND_DEVICE_TYPE_IGPU:
		return "igpu"
	default:
		return "accel"
	}
}
