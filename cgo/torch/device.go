package torch

/*
#include "plugin.h"
*/
import "C"

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/umad-dev/umad/trainspec"
)

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
func (r *Runtime) ResolveDevice(s string) (trainspec.Device, error) {
	if strings.TrimSpace(s) == trainspec.DeviceAuto {
		n, built := r.CUDADevices()
		if n > 0 {
			return trainspec.Device{CUDA: true}, nil
		}
		if built {
			slog.Warn("the torch plugin is a CUDA build, but libtorch sees no GPU (no driver, or CUDA_VISIBLE_DEVICES): training on the CPU")
		}
		return trainspec.CPU, nil
	}
	d, err := trainspec.ParseDevice(s)
	if err != nil {
		return d, err
	}
	return d, r.CheckDevice(d)
}

// CheckDevice says why a model cannot live on d, in the plugin's words (nil: it can).
func (r *Runtime) CheckDevice(d trainspec.Device) error {
	kind, idx := deviceCodes(d)
	var err error
	r.do(func() {
		if C.plugin_check_device(kind, idx, r.errBuf, errBufLen) != C.UMAD_OK {
			err = errors.New(C.GoString(r.errBuf))
		}
	})
	return err
}

// deviceCodes is d in the plugin's terms.
func deviceCodes(d trainspec.Device) (kind, index C.int32_t) {
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
