package torch

/*
#include "plugin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// Device is where a model's tensors live: the CPU, or GPU Index of the GPUs libtorch sees.
// The zero value is the CPU.
type Device struct {
	CUDA  bool
	Index int
}

// CPU is the host.
var CPU = Device{}

func (d Device) String() string {
	if !d.CUDA {
		return "cpu"
	}
	return "cuda:" + strconv.Itoa(d.Index)
}

// DeviceAuto picks cuda:0 when libtorch sees a GPU, else the CPU (ResolveDevice).
const DeviceAuto = "auto"

// ParseDevice reads cpu, cuda (GPU 0) or cuda:N.
func ParseDevice(s string) (Device, error) {
	switch s = strings.TrimSpace(s); s {
	case "cpu":
		return CPU, nil
	case "cuda":
		return Device{CUDA: true}, nil
	}
	if n, ok := strings.CutPrefix(s, "cuda:"); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			return Device{CUDA: true, Index: i}, nil
		}
	}
	return CPU, fmt.Errorf("device %q: want cpu, cuda, cuda:N or %s", s, DeviceAuto)
}

// CUDADevices is the number of GPUs the plugin's libtorch sees; built says whether that
// libtorch has CUDA at all (Debian's libtorch does not).
func (r *Runtime) CUDADevices() (n int, built bool) {
	r.do(func() { n = int(C.plugin_cuda_device_count()) })
	return max(n, 0), n >= 0
}

// CUDAAvailable reports whether the plugin's libtorch sees a usable GPU.
func (r *Runtime) CUDAAvailable() bool {
	n, _ := r.CUDADevices()
	return n > 0
}

// ResolveDevice parses a device flag (cpu, cuda, cuda:N, auto) and checks that a model can
// live there; a GPU on a plugin without CUDA is refused with the one line saying what to do.
func (r *Runtime) ResolveDevice(s string) (Device, error) {
	if strings.TrimSpace(s) == DeviceAuto {
		n, built := r.CUDADevices()
		if n > 0 {
			return Device{CUDA: true}, nil
		}
		if built {
			slog.Warn("the torch plugin is a CUDA build, but libtorch sees no GPU (no driver, or CUDA_VISIBLE_DEVICES): training on the CPU")
		}
		return CPU, nil
	}
	d, err := ParseDevice(s)
	if err != nil {
		return d, err
	}
	return d, r.CheckDevice(d)
}

// CheckDevice says why a model cannot live on d, in the plugin's words (nil: it can).
func (r *Runtime) CheckDevice(d Device) error {
	kind, idx := d.codes()
	var err error
	r.do(func() {
		if C.plugin_check_device(kind, idx, r.errBuf, errBufLen) != C.UMAD_OK {
			err = errors.New(C.GoString(r.errBuf))
		}
	})
	return err
}

func (d Device) codes() (kind, index C.int32_t) {
	if d.CUDA {
		return C.UMAD_CUDA, C.int32_t(d.Index)
	}
	return C.UMAD_CPU, 0
}

// ReleaseCache returns libtorch's cached, unused GPU memory to the driver and the plugin's
// cached CPU blocks to the system, so that llama.cpp can use them in the next phase.
func (r *Runtime) ReleaseCache() {
	r.do(func() { C.plugin_release_cache() })
}

// Precision is how a model computes, as --dtype names it.
type Precision string

const (
	// PrecisionF32 computes in the parameter dtype (f32; f64 for gradient checks). "" is the same.
	PrecisionF32 Precision = "f32"
	// PrecisionBF16 is mixed precision: f32 master weights, gradients and AdamW state, each
	// weight cast to bf16 where it is used (matmuls and activations in bf16, norms and softmax
	// in f32). Frozen tensors (a reference model, a LoRA base) are stored in bf16.
	PrecisionBF16 Precision = "bf16"
)

// ParsePrecision reads f32 or bf16 ("" is f32).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.TrimSpace(s)); p {
	case "", PrecisionF32:
		return PrecisionF32, nil
	case PrecisionBF16:
		return p, nil
	}
	return "", fmt.Errorf("dtype %q: want f32 or bf16", s)
}
