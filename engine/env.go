package engine

import "github.com/umad-dev/umad/cgo/llama"

// What llama.cpp runs on: the backend libraries found at start (ggml's CUDA backend), the
// devices, and the CPU features compiled in. For `umad env` and the GPU defaults.

// Device is a device ggml can run on (the CPU included).
type Device = llama.Device

// Backend is a backend library found at start and whether it is in use.
type Backend = llama.Backend

// BackendsEnv names the directory searched for backend libraries instead of the binary's.
const BackendsEnv = llama.BackendsEnv

// Devices lists the devices of every loaded backend.
func Devices() []Device { return llama.Devices() }

// CheckDevices refuses names that are not GPUs here, before anything loads.
func CheckDevices(names []string) error { return llama.CheckDevices(names) }

// Backends lists the backend libraries found at start.
func Backends() []Backend { return llama.Backends() }

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
