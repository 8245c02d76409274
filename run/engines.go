package run

// The llama.cpp engines' threads and placement, as every run that generates reads them.

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/umad-dev/umad/engine"
)

// GPULayers is the layers to offload (--gpu-layers): n when given, else every layer on a
// machine with a GPU.
func GPULayers(n int, given bool) (int, error) {
	if !given {
		return engine.DefaultGPULayers(), nil
	}
	if n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("--gpu-layers must be 0 or more, got %d", n)
}

// PlaceEngines is the engines' placement: GPULayers' layers on the devices listed
// (--devices, comma-separated).
func PlaceEngines(layers int, given bool, devices string) (engine.Placement, error) {
	n, err := GPULayers(layers, given)
	if err != nil {
		return engine.Placement{}, err
	}
	p := engine.Placement{GPULayers: n}
	for _, d := range strings.Split(devices, ",") {
		if d = strings.TrimSpace(d); d != "" {
			p.Devices = append(p.Devices, d)
		}
	}
	if err := engine.CheckDevices(p.Devices); err != nil {
		return p, fmt.Errorf("--devices: %w", err)
	}
	return p, nil
}

// CheckThreads validates a thread count given by flag: 0 (the default) or 1 to 4x the
// logical CPUs (more threads only spin; llama.cpp asserts past engine.MaxThreads and hangs).
func CheckThreads(flag string, n int) error {
	if limit := min(4*runtime.NumCPU(), engine.MaxThreads); n < 0 || n > limit {
		return fmt.Errorf("--%s must be 0 (the default) or 1 to %d (4x the logical CPUs), got %d", flag, limit, n)
	}
	return nil
}

// EngineOptions are the engines' options: slots sequences of ctx tokens each, threads
// threads, and the KV cache's type and flash attention as their flags give them.
func EngineOptions(slots, ctx, threads int, kvType, flashAttn string) (engine.Options, error) {
	if err := CheckThreads("threads", threads); err != nil {
		return engine.Options{}, err
	}
	if err := engine.CheckSlots(slots); err != nil {
		return engine.Options{}, fmt.Errorf("--slots: %w", err)
	}
	if ctx < 2 {
		return engine.Options{}, fmt.Errorf("--ctx must be at least 2, got %d", ctx)
	}
	return engine.ParseOptions(slots, ctx, threads, kvType, flashAttn)
}
