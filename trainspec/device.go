package trainspec

import (
	"fmt"
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

// DeviceAuto picks cuda:0 when libtorch sees a GPU, else the CPU (torch's ResolveDevice).
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
