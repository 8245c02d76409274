// Package torch is the Go side of libumad_torch, umad's libtorch plugin: it loads the plugin
// with dlopen, checks its ABI version, and routes every call through one goroutine locked
// to its OS thread (libtorch's OpenMP pools are per thread; concurrent callers each spawn
// one and oversubscribe the cores).
package torch

/*
#cgo CFLAGS: -O2 -I${SRCDIR}/../../kernels
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// PluginName is the file the build produces (see kernels/README.md).
const PluginName = "libumad_torch.so"

// PluginEnv names the environment variable that points at the plugin file.
const PluginEnv = "UMAD_TORCH_PLUGIN"

// BuildHint says how to produce the plugin; it ends every "not found" error.
const BuildHint = "build it from the umad source tree with `cmake -S . -B build && cmake --build build -j2` " +
	"(needs libtorch, e.g. Debian libtorch-dev), or point --torch-plugin / " + PluginEnv + " at it"

// ErrPluginNotFound reports that no plugin file exists at any searched place.
var ErrPluginNotFound = errors.New("libtorch plugin not found")

// Options configure Open.
type Options struct {
	// Plugin is an explicit plugin path (a --torch-plugin flag); empty searches.
	Plugin string
	// Threads for libtorch's intra-op pool; 0 means all CPUs.
	Threads int
}

// Runtime is the loaded plugin and its worker goroutine. There is one per process.
type Runtime struct {
	path          string
	torchVersion  string
	loadedVersion string // what the loaded libtorch reports itself to be
	cudaVersion   string // "" for a CPU build
	calls         chan func()
	errBuf        *C.char
}

const errBufLen = 4096

var (
	openMu  sync.Mutex
	loaded  *Runtime
	loadErr error
)

// Open loads the plugin on first use (later calls return the same Runtime, since a plugin
// is never unloaded) and sets the libtorch thread count.
func Open(opts Options) (*Runtime, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if loaded == nil && loadErr == nil {
		path, err := findPlugin(opts.Plugin)
		if err != nil {
			return nil, err
		}
		loaded, loadErr = load(path)
	}
	if loadErr != nil {
		return nil, loadErr
	}
	if opts.Plugin != "" && opts.Plugin != loaded.path {
		return nil, fmt.Errorf("torch plugin %s requested, but %s is already loaded in this process", opts.Plugin, loaded.path)
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	var err error
	loaded.do(func() {
		err = loaded.check(C.plugin_set_threads(C.int32_t(threads), loaded.errBuf, errBufLen), "set threads")
	})
	if err != nil {
		return nil, err
	}
	return loaded, nil
}

// findPlugin searches: the explicit path, $UMAD_TORCH_PLUGIN, next to the executable and in
// build/ beside it (a source build's ./umad run from elsewhere), then build/ in the working
// directory and each of its parents (a source checkout).
func findPlugin(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%w at %s: %v; %s", ErrPluginNotFound, explicit, err, BuildHint)
		}
		return explicit, nil
	}
	if env := os.Getenv(PluginEnv); env != "" {
		if _, err := os.Stat(env); err != nil {
			return "", fmt.Errorf("%w at %s=%s: %v; %s", ErrPluginNotFound, PluginEnv, env, err, BuildHint)
		}
		return env, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		tried = append(tried, filepath.Join(filepath.Dir(exe), PluginName), filepath.Join(filepath.Dir(exe), "build", PluginName))
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			tried = append(tried, filepath.Join(dir, "build", PluginName))
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked next to the executable, in build/ beside it, and in build/ of the working directory and its parents); %s",
		ErrPluginNotFound, BuildHint)
}

// load preloads the libraries named in PLUGIN.deps with RTLD_GLOBAL (pip PyTorch needs its
// libtorch_global_deps first), dlopens the plugin, checks the ABI and starts the worker.
func load(path string) (*Runtime, error) {
	chooseOpenBLASCore()
	r := &Runtime{path: path, calls: make(chan func()), errBuf: (*C.char)(C.malloc(errBufLen))}
	ready := make(chan error)
	go r.worker(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Runtime) worker(ready chan<- error) {
	runtime.LockOSThread()
	if err := r.dlopen(); err != nil {
		ready <- err
		return // the locked thread exits with the goroutine
	}
	ready <- nil
	for f := range r.calls {
		f()
	}
}

// dlopen runs on the worker thread, so libtorch's thread-local state lives there.
func (r *Runtime) dlopen() error {
	deps, err := readDeps(r.path + ".deps")
	if err != nil {
		return err
	}
	for _, d := range deps {
		cd := C.CString(d)
		rc := C.plugin_preload_global(cd, r.errBuf, errBufLen)
		C.free(unsafe.Pointer(cd))
		if rc != 0 {
			return fmt.Errorf("load torch dependency %s (listed in %s.deps): %s", d, r.path, C.GoString(r.errBuf))
		}
	}
	cpath := C.CString(r.path)
	defer C.free(unsafe.Pointer(cpath))
	switch C.plugin_load(cpath, r.errBuf, errBufLen) {
	case 0:
	case 2:
		return fmt.Errorf("torch plugin %s has ABI version %d, this umad needs %d: rebuild that plugin from this source tree (cmake --build build)",
			r.path, int(C.plugin_abi_version()), int(C.UMAD_TORCH_ABI_VERSION))
	default:
		return fmt.Errorf("load torch plugin %s: %s", r.path, C.GoString(r.errBuf))
	}
	r.torchVersion, r.loadedVersion = C.GoString(C.plugin_torch_version()), libraryVersion(C.GoString(C.plugin_torch_library_path()))
	r.cudaVersion = C.GoString(C.plugin_torch_cuda_version())
	return sameTorch(r.path, r.torchVersion, r.loadedVersion)
}

// sameTorch refuses a plugin whose libtorch was replaced under it by another minor version
// (a pip upgrade): C++ has no stable ABI across them, so it would crash later, not fail.
// An unknown loaded version ("") passes.
func sameTorch(plugin, built, loaded string) error {
	if loaded == "" || minorOf(built) == minorOf(loaded) {
		return nil
	}
	return fmt.Errorf("torch plugin %s was built against libtorch %s, but this process loaded libtorch %s: rebuild the plugin against the libtorch in use (./build.sh, or cmake --build build; kernels/README.md)",
		plugin, built, loaded)
}

// libraryVersion is the version of the libtorch_cpu at path, "" when it cannot tell:
// Debian names the file libtorch_cpu.so.2.6.0 (reached through its .so link), and pip
// keeps torch/lib/libtorch_cpu.so beside torch/version.py's __version__ = '2.11.0+cu130'.
func libraryVersion(path string) string {
	if path == "" {
		return ""
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		if _, v, ok := strings.Cut(filepath.Base(real), ".so."); ok {
			return v
		}
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "..", "version.py"))
	if err != nil {
		return ""
	}
	m := pipVersion.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

var pipVersion = regexp.MustCompile(`(?m)^__version__\s*=\s*['"]([^'"]+)['"]`)

// minorOf is a version's "major.minor": "2.6" of "2.6.0+cu124".
func minorOf(v string) string {
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	return major + "." + minor
}

func readDeps(p string) ([]string, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer f.Close()
	var deps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			deps = append(deps, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return deps, nil
}

// do runs f on the worker thread and waits for it.
func (r *Runtime) do(f func()) {
	done := make(chan struct{})
	r.calls <- func() { f(); close(done) }
	<-done
}

// check turns a plugin return code into an error with the plugin's message. It must run on
// the worker thread, which owns errBuf.
func (r *Runtime) check(rc C.int, what string) error {
	if rc == C.UMAD_OK {
		return nil
	}
	return fmt.Errorf("%s: %s", what, C.GoString(r.errBuf))
}

// Path is the plugin file in use.
func (r *Runtime) Path() string { return r.path }

// chooseOpenBLASCore names OpenBLAS's kernel set by the CPU's features unless the user has
// (OPENBLAS_CORETYPE). OpenBLAS picks by CPU model number, and Debian 12's 0.3.21 does not
// know newer Xeons (nor the generic model a VM reports): it fell back to its SSE3 Prescott
// kernels there, which made the demo's training step 1.4x slower and large matmuls slower
// still. The kernels compute the same products in another order, so the bytes of a run
// follow this choice; it is read once, when libtorch loads.
func chooseOpenBLASCore() {
	if os.Getenv(openBLASCoreEnv) != "" {
		return
	}
	switch x := cpu.X86; {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX512CD:
		os.Setenv(openBLASCoreEnv, "SkylakeX")
	case x.HasAVX2 && x.HasFMA:
		os.Setenv(openBLASCoreEnv, "Haswell")
	}
}

const openBLASCoreEnv = "OPENBLAS_CORETYPE"

// BLASCore is the kernel set of libtorch's OpenBLAS ("" when its BLAS is not OpenBLAS).
func (r *Runtime) BLASCore() string { return C.GoString(C.plugin_blas_core()) }

// TorchVersion is the libtorch version the plugin was built against.
func (r *Runtime) TorchVersion() string { return r.torchVersion }

// CUDAVersion is the CUDA version a CUDA plugin was built against, "" for a CPU build.
func (r *Runtime) CUDAVersion() string { return r.cudaVersion }
