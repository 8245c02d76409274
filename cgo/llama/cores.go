package llama

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// PhysicalCores counts physical cores from sysfs (distinct package/core pairs), falling
// back to the logical CPU count. Thread counts default to this: hyper-threads slow
// llama.cpp's matrix kernels down (docs/ARCHITECTURE.md section 3).
func PhysicalCores() int {
	paths, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology/core_id")
	seen := map[string]bool{}
	for _, p := range paths {
		core, err1 := os.ReadFile(p)
		pkg, err2 := os.ReadFile(filepath.Join(filepath.Dir(p), "physical_package_id"))
		if err1 != nil || err2 != nil {
			continue
		}
		seen[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	n := len(seen)
	if n == 0 || n > runtime.NumCPU() {
		n = runtime.NumCPU()
	}
	return n
}
