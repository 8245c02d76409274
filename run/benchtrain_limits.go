package run

// What `umad bench train` compares its step with: the matmul peak on the step's own
// shapes, the memory bandwidth where llama.cpp decodes, and libtorch's profile of the
// trainer's calls.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/umad-dev/umad/bench"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/trainspec"
)

// matmulPeak is the best FLOP/s of libtorch's matrix products on the trainer's device,
// dtype and threads at the step's own shapes: for each weight matrix [out, in] and the
// rows a micro-batch multiplies it by, the forward (rows x in by in x out), the input's
// gradient (rows x out by out x in) and the weight's (out x rows by rows x in), each the
// best of repeats until it stops improving. No phase made of these products can exceed it.
func matmulPeak(rt *torch.Runtime, opts torch.ModelOptions, weights [][2]int64, rowsOf func([2]int64) int64) (flops float64, shape, dtype string, err error) {
	dt, dtype := torch.Float32, "f32"
	if opts.Precision == trainspec.PrecisionBF16 {
		dt, dtype = torch.BFloat16, "bf16"
	}
	var products int
	for _, w := range weights {
		out, in, tokens := w[0], w[1], rowsOf(w)
		for _, size := range []torch.OpSize{{M: tokens, K: in, N: out}, {M: tokens, K: out, N: in}, {M: out, K: tokens, N: in}} {
			s, err := bench.StableBest(func() (float64, error) { return rt.OpSeconds(torch.BenchMatmul, opts.Device, dt, size, 1) }, 3, 3, 20)
			if err != nil {
				return 0, "", "", err
			}
			products++
			if f := 2 * float64(size.M) * float64(size.K) * float64(size.N) / s; f > flops {
				flops, shape = f, fmt.Sprintf("%d x %d by %d x %d", size.M, size.K, size.K, size.N)
			}
		}
	}
	return flops, fmt.Sprintf("%s, the best of the step's %d products", shape, products), dtype, nil
}

// limits sizes the model's work from the plan and measures the memory bandwidth where
// llama.cpp decodes.
func (b *TrainBench) limits(rt *torch.Runtime, layers int, step *bench.TrainStep) error {
	a := step.Plan.Agents[0].Agent
	step.LoRA, step.MatmulParams = a.LoRA.Rank > 0, a.Shape.MatmulParams()
	step.HeadParams = int64(a.Shape.Vocab) * int64(a.Shape.Hidden)
	var err error
	if step.RolloutBytes, err = a.Shape.DecodeBytes(a.RolloutType); err != nil {
		return err
	}
	step.ParallelSeqs = min(a.Slots, b.Batch*b.G)
	if layers == 0 {
		step.Bandwidth = bench.TriadBandwidth(768 << 20)
		step.BWHow = fmt.Sprintf("a STREAM-style triad over 3 x 256 MiB of host memory on all %d logical CPUs, the best of repeats until it stops improving", runtime.NumCPU())
		return nil
	}
	// llama.cpp decodes on the GPU: its memory's bandwidth, by libtorch's copy of 1 GiB of f32.
	elems := int64(1 << 28)
	s, err := rt.OpSeconds(torch.BenchCopy, trainspec.Device{CUDA: true}, torch.Float32, torch.OpSize{N: elems}, 5)
	if err != nil {
		return fmt.Errorf("GPU bandwidth: %w", err)
	}
	step.Bandwidth, step.BWHow = 2*4*float64(elems)/s, "cuda:0, libtorch's copy of 1 GiB, bytes read and written"
	return nil
}

// trainBenchDevice names where the step trained and rolled out.
func trainBenchDevice(d trainspec.Device, layers int) string {
	train := "trainer on the CPU"
	if d.CUDA {
		train = fmt.Sprintf("trainer on cuda:%d", d.Index)
	}
	return train + ", rollouts on " + bench.Device(layers)
}

// startProfile makes the torch plugin trace its calls into dir, a new or empty directory,
// through bench.ProfileEnv, which the plugin reads at its first traced call: set here,
// before any.
func startProfile(dir, results string) error {
	if dir == "" {
		return nil
	}
	if results != "" {
		return errors.New("--profile slows the step: its figures cannot go to --results")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--profile %s: give a new or empty directory (its traces would mix with what is there)", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return os.Setenv(bench.ProfileEnv, abs)
}

// printProfile prints where the last step's traced calls in dir spent their time; nothing
// without a profile.
func printProfile(w io.Writer, dir string) error {
	if dir == "" {
		return nil
	}
	phases, err := bench.LastStepProfile(dir)
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	_, err = fmt.Fprint(w, bench.ProfileTable(phases, 12))
	return err
}
