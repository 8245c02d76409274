// Package sysmem holds the memory facts that cgo/llama's KV-cache check and the memory plan
// (package memplan) must agree on: what the machine has available, and what a llama.cpp KV
// cache takes. It is pure Go and imports nothing of umad, so the cgo layer may use it.
package sysmem

import (
	"bufio"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Available is MemAvailable from /proc/meminfo in bytes: the memory new allocations can
// take without swapping. ok is false where there is no /proc/meminfo.
func Available() (bytes int64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// ResetPeakRSS starts the process's resident high-water mark (PeakRSS) afresh from its
// present resident size.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakRSS is the process's resident high-water mark (VmHWM) in bytes.
func PeakRSS() (int64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("/proc/self/status has no VmHWM")
}

// AddressSpaceLeft is what the process's address-space limit (RLIMIT_AS, as `prlimit --as`
// or `ulimit -v` set it) leaves above its present size (VmSize), in bytes: a process under
// such a limit dies at it however much memory the machine has. ok is false without a limit.
func AddressSpaceLeft() (bytes int64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil || lim.Cur >= math.MaxInt64 {
		return 0, false
	}
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, found := strings.CutPrefix(line, "VmSize:"); found {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, false
			}
			return max(int64(lim.Cur)-kb<<10, 0), true
		}
	}
	return 0, false
}

// KVCache describes a llama.cpp KV cache.
type KVCache struct {
	Layers, KVHeads int
	HeadK, HeadV    int // key and value widths per head
	// NCtx is the cells asked for in all; Seqs the parallel sequences. Without Unified each
	// sequence gets a stream of its own, padded to a multiple of 256 cells.
	NCtx, Seqs int
	Unified    bool
	Type       string // f32, f16 or q8_0
}

// ElemBytes is the storage of one KV element of a type (q8_0: 32 values in 34 bytes); 0 for
// an unknown type.
func ElemBytes(typ string) float64 {
	return map[string]float64{"f32": 4, "f16": 2, "q8_0": 34.0 / 32}[typ]
}

// Cells is the KV cells llama.cpp allocates.
func (k KVCache) Cells() int64 {
	if k.Unified || k.Seqs < 1 {
		return int64(k.NCtx)
	}
	return (int64(k.NCtx)/int64(k.Seqs) + 255) / 256 * 256 * int64(k.Seqs)
}

// Bytes is the size of the cache's K and V tensors.
func (k KVCache) Bytes() float64 {
	return float64(k.Cells()) * float64(int64(k.Layers)*int64(k.KVHeads)*int64(k.HeadK+k.HeadV)) * ElemBytes(k.Type)
}
