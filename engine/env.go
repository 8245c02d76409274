package engine

import "github.com/umad-dev/umad/cgo/llama"

// What llama.cpp runs on: the backend libraries found at start (ggml's CUDA backend), the
// devices, and the CPU features compiled in. For `umad env` and the GPU defaults; the
// types are the engine's own, converted from the binding's here.

// Device is a device ggml can run on (the CPU included).
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

// Backend is a backend library found at start and whether it is in use.
type Backend struct {
	Path   string `json:"path"`
	Loaded bool   `json:"loaded"`
	// Problem says why a library that was found is not in use ("" when loaded).
	Problem string `json:"problem,omitempty"`
}

// BackendsEnv names the directory searched for backend libraries instead of the binary's.
const BackendsEnv = llama.BackendsEnv

// Devices lists the devices of every loaded backend.
func Devices() []Device {
	src := llama.Devices()
	if src == nil {
		return nil
	}
	out := make([]Device, len(src))
	for i, d := range src {
		out[i] = Device(d)
	}
	return out
}

// CheckDevices refuses names that are not GPUs here, before anything loads.
func CheckDevices(names []string) error { return llama.CheckDevices(names) }

// Backends lists the backend libraries found at start.
func Backends() []Backend {
	src := llama.Backends()
	if src == nil {
		return nil // umad env --json keeps writing null for none
	}
	out := make([]Backend, len(src))
	for i, b := range src {
		out[i] = Backend(b)
	}
	return out
}

// SystemInfo is llama.cpp's line of compiled-in CPU features.
func SystemInfo() string { return llama.SystemInfo() }

// AllLayers offloads every layer of any model (llama.cpp caps it at the model's count).
const AllLayers = 999

// DefaultGPULayers is every layer when a GPU is present, else none.
func DefaultGPULayers() int {
	if llama.GPUCount() > 0 {
		return AllLayers
	}
	return 0
}
