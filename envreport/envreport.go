// Package envreport says what umad runs on (umad env): its build, llama.cpp's CPU features,
// the GPU backends and devices, the libtorch plugin and the thread settings.
package envreport

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
)

// Report is what umad runs on, as `umad env` prints it.
type Report struct {
	Build struct {
		Revision string `json:"revision"`
		Modified bool   `json:"modified"`
		Go       string `json:"go"`
		GGML     string `json:"ggml"`
		CFlags   string `json:"cgo_cflags"`
	} `json:"build"`
	CPUFeatures string           `json:"cpu_features"`
	Backends    []engine.Backend `json:"backends"`
	Devices     []engine.Device  `json:"devices"`
	Torch       struct {
		Plugin  string `json:"plugin,omitempty"`
		Version string `json:"version,omitempty"`
		CUDA    bool   `json:"cuda"`                   // a GPU the trainer can use (--train-device auto picks cuda:0)
		GPUs    int    `json:"gpus"`                   // GPUs libtorch sees
		Built   bool   `json:"cuda_built"`             // the plugin's libtorch has CUDA (Debian's has not)
		CUDAVer string `json:"cuda_version,omitempty"` // the CUDA a CUDA plugin was built against
		BLAS    string `json:"blas_core,omitempty"`    // the kernel set of an OpenBLAS libtorch
		Error   string `json:"error,omitempty"`
	} `json:"torch"`
	Threads struct {
		LogicalCPUs      int    `json:"logical_cpus"`
		GOMAXPROCS       int    `json:"gomaxprocs"`
		LlamaDefault     int    `json:"llama_default"`
		TorchDefault     int    `json:"torch_default"`
		OMPNumThreads    string `json:"omp_num_threads,omitempty"`
		DefaultGPULayers int    `json:"default_gpu_layers"`
	} `json:"threads"`
}

// Collect gathers the report; plugin is the libtorch plugin's path ("": the usual places).
// It starts no model and changes nothing.
func Collect(plugin string) Report {
	var r Report
	r.Build.Go = runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				r.Build.Revision = s.Value
			case "vcs.modified":
				r.Build.Modified = s.Value == "true"
			case "CGO_CFLAGS":
				r.Build.CFlags = s.Value
			}
		}
		for _, d := range info.Deps {
			if d.Path == "github.com/ollama/ollama" {
				r.Build.GGML = d.Path + " " + d.Version
			}
		}
	}
	r.CPUFeatures = engine.SystemInfo()
	r.Backends = engine.Backends()
	r.Devices = engine.Devices()
	if rt, err := torch.Open(torch.Options{Plugin: plugin}); err != nil {
		r.Torch.Error = err.Error()
	} else {
		r.Torch.Plugin, r.Torch.Version = rt.Path(), rt.TorchVersion()
		r.Torch.GPUs, r.Torch.Built = rt.CUDADevices()
		r.Torch.CUDAVer = rt.CUDAVersion()
		r.Torch.BLAS = rt.BLASCore()
		r.Torch.CUDA = r.Torch.GPUs > 0
	}
	r.Threads.LogicalCPUs = runtime.NumCPU()
	r.Threads.GOMAXPROCS = runtime.GOMAXPROCS(0)
	r.Threads.LlamaDefault = engine.SharedThreads(1)
	r.Threads.TorchDefault = runtime.NumCPU()
	r.Threads.OMPNumThreads = os.Getenv("OMP_NUM_THREADS")
	r.Threads.DefaultGPULayers = engine.DefaultGPULayers()
	return r
}

// Write prints the report as text.
func (r Report) Write(w io.Writer) {
	b := r.Build
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	} else if b.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(w, "umad      commit %s, %s, %s\n", rev, b.Go, b.GGML)
	if b.CFlags != "" {
		fmt.Fprintf(w, "          cgo flags %s\n", b.CFlags)
	}
	fmt.Fprintf(w, "llama.cpp %s\n", strings.TrimSpace(r.CPUFeatures))
	if len(r.Backends) == 0 {
		fmt.Fprintf(w, "backends  no GPU backend library found (./build.sh cuda builds one; $%s names its directory)\n", engine.BackendsEnv)
	}
	for _, bk := range r.Backends {
		state := "loaded"
		if !bk.Loaded {
			state = "not used: " + bk.Problem
		}
		fmt.Fprintf(w, "backends  %s: %s\n", bk.Path, state)
	}
	for _, d := range r.Devices {
		line := fmt.Sprintf("device    %s (%s): %s", d.Name, d.Kind, d.Description)
		if d.TotalBytes > 0 {
			line += fmt.Sprintf(", %.1f of %.1f GiB free", float64(d.FreeBytes)/(1<<30), float64(d.TotalBytes)/(1<<30))
		}
		if d.ComputeMajor > 0 {
			line += fmt.Sprintf(", compute %d.%d", d.ComputeMajor, d.ComputeMinor)
		}
		fmt.Fprintln(w, line)
	}
	if r.Torch.Error != "" {
		fmt.Fprintf(w, "libtorch  not available: %s\n", r.Torch.Error)
	} else {
		version, gpu := r.Torch.Version, "CPU only (built without CUDA: see kernels/README.md for a CUDA build)"
		if r.Torch.Built {
			version += " (CUDA " + r.Torch.CUDAVer + ")"
			gpu = fmt.Sprintf("%d GPUs: --train-device cuda:0 to cuda:%d", r.Torch.GPUs, r.Torch.GPUs-1)
			if !r.Torch.CUDA {
				gpu = "0 GPUs: training falls back to the CPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
			}
		}
		fmt.Fprintf(w, "libtorch  %s, %s (%s)\n", version, gpu, r.Torch.Plugin)
		if r.Torch.BLAS != "" {
			fmt.Fprintf(w, "          OpenBLAS kernels %s (OPENBLAS_CORETYPE chooses others)\n", r.Torch.BLAS)
		}
	}
	t := r.Threads
	omp := t.OMPNumThreads
	if omp == "" {
		omp = "unset"
	}
	fmt.Fprintf(w, "threads   %d logical CPUs, GOMAXPROCS %d; llama.cpp default %d, libtorch default %d, OMP_NUM_THREADS %s\n",
		t.LogicalCPUs, t.GOMAXPROCS, t.LlamaDefault, t.TorchDefault, omp)
	fmt.Fprintf(w, "gpu       --gpu-layers default %d\n", t.DefaultGPULayers)
}
