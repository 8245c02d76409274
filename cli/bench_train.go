package cli

// `umad bench train`: one whole training step of `umad train`, timed by phase against the
// machine's limits measured in the same run.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/bench"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

// benchTrainPassed are the train flags bench train takes as train defines them and hands
// on to the run when set.
var benchTrainPassed = []string{"threads", "gpu-layers", "slots", "kv-type", "mini-batch", "rollout-dtype", "lora-rank", "no-memory-check",
	"torch-threads", "torch-plugin", "train-device", "dtype", "grad-checkpoint"}

// benchTrainShape are the flags of the step's size, which bench train always hands on.
var benchTrainShape = []string{"steps", "batch", "g", "max-tokens", "prompt-limit"}

// benchTrainCommand is `umad bench train`.
func benchTrainCommand() *ucli.Command {
	var passed []ucli.Flag
	for _, f := range trainFlags() {
		if slices.Contains(benchTrainPassed, f.Names()[0]) {
			passed = append(passed, f)
		}
	}
	return &ucli.Command{
		Name:      "train",
		Usage:     "one whole training step by phase (rollout, log-probs, reference, update, sync) against the matmul peak, the memory bandwidth and the memory plan",
		UsageText: "umad bench train [--preset qwen2.5-0.5b [--layers 4]] [--steps 2] [--batch 2] [-g 4] [--max-tokens 32] [--results bench/RESULTS.md]",
		Description: "Runs `umad train --algo grpo --turns 1` (one agent, the built-in synthetic problems, no\n" +
			"validation) for --steps steps on random weights: a generated tiny qwen2 model, or --preset's\n" +
			"real shape with --layers of its layers. It prints the last step's phases from the run's\n" +
			"metrics: seconds, share of the step, tokens/s, and for the libtorch phases the model FLOP/s\n" +
			"(2N per token forward, 6N forward and backward, 4N with LoRA; N the matrix weights, the\n" +
			"lm_head's for response tokens only) against the peak of libtorch's matrix products after\n" +
			"each run on the trainer's device, dtype and threads at the step's own shapes (each weight\n" +
			"matrix's forward and two gradient products for the rows a group multiplies it by, each the\n" +
			"best of repeats until it stops improving). Rollout decoding is compared with the binding\n" +
			"one of two bounds: the weights read once per decode step of up to min(--slots, --batch x -g)\n" +
			"sequences at the memory bandwidth (on the CPU a STREAM-style triad on every logical CPU; on a\n" +
			"GPU libtorch's copy on cuda:0, so the plugin must see the GPU), or 2N FLOPs per token at the\n" +
			"matmul peak. Every figure is min / median / max over --runs runs, and a phase above the peak\n" +
			"fails the benchmark (the peak or the FLOP count is then wrong). Peak memory is the process's\n" +
			"peak RSS during the runs against the run's memory plan. The first step includes the warm-up:\n" +
			"use --steps 2 or more. The flags after --section are umad train's own, handed on to the run\n" +
			"when set.",
		Flags: slices.Concat([]ucli.Flag{
			&ucli.StringFlag{Name: "preset", Usage: "random weights of a real shape instead of the tiny model: " + model.PresetNames()},
			&ucli.IntFlag{Name: "layers", Usage: "keep only this many of the preset's layers (0 = all)"},
			&ucli.IntFlag{Name: "steps", Value: 2, Usage: "training steps; the last one is reported"},
			&ucli.IntFlag{Name: "batch", Value: 2, Usage: "problems per step"},
			&ucli.IntFlag{Name: "g", Value: 4, Usage: "trajectories per problem"},
			&ucli.IntFlag{Name: "max-tokens", Value: 32, Usage: "most tokens per response"},
			&ucli.IntFlag{Name: "prompt-limit", Value: 512, Usage: "most prompt tokens (the plan sizes activations by it)"},
			&ucli.IntFlag{Name: "runs", Value: 3, Usage: "whole runs of the steps, each with its own peak and bandwidth: figures are min / median / max over them"},
			&ucli.StringFlag{Name: "results", Usage: "update this Markdown file's section (e.g. bench/RESULTS.md)"},
			&ucli.StringFlag{Name: "section", Value: "train", Usage: "name of the section --results rewrites"},
			&ucli.StringFlag{Name: "profile", Usage: "write libtorch's profile of every trainer call into this new or empty directory (one Chrome trace each) and print where the last step's log-probs and update spent their time, op by op; the profiler slows the step, so not with --results"},
		}, passed),
		Action: benchTrain,
	}
}

func benchTrain(c *ucli.Context) error {
	if err := checkCounts(c, append([]string{"runs"}, benchTrainShape...)...); err != nil {
		return err
	}
	if c.Int("runs") > 100 {
		return fmt.Errorf("--runs %d: at most 100 (each run trains --steps steps)", c.Int("runs"))
	}
	shape, err := presetShape(c.String("preset"), c.Int("layers"))
	if err != nil {
		return err
	}
	layers, err := gpuLayers(c)
	if err != nil {
		return err
	}
	if err := checkThreads("threads", c.Int("threads")); err != nil {
		return err
	}
	profile := c.String("profile")
	rt, opts, err := openTorch(c, c.Int("torch-threads"))
	if err == nil {
		err = startProfile(profile, c.String("results"))
	}
	if err != nil {
		return err
	}
	if err := rt.CheckDevice(trainspec.Device{CUDA: true}); layers > 0 && err != nil {
		return fmt.Errorf("--gpu-layers: the GPU's bandwidth is measured through the torch plugin, which cannot use the GPU: %w", err)
	}
	dir, err := os.MkdirTemp("", "umad-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	label, err := benchTrainModel(dir, c.String("preset"), shape)
	if err != nil {
		return err
	}
	runs := make([]bench.TrainStep, c.Int("runs"))
	for i := range runs {
		if runs[i], err = benchTrainOnce(c, rt, opts, dir, layers); err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		runs[i].Shape, runs[i].Device = label, benchTrainDevice(opts.Device, layers)
		runs[i].Setup = fmt.Sprintf("%d problems x G %d, at most %d tokens", c.Int("batch"), c.Int("g"), c.Int("max-tokens"))
		runs[i].Command = strings.Join(os.Args[1:], " ")
	}
	body, err := bench.TrainSection(runs)
	fmt.Fprint(c.App.Writer, body)
	if err != nil {
		return err // nothing written: a figure above the peak is no result
	}
	if err := printProfile(c.App.Writer, profile); err != nil {
		return err
	}
	if p := c.String("results"); p != "" {
		return bench.UpdateSection(p, c.String("section"), body)
	}
	return nil
}

// benchTrainOnce is one run of the step in dir/run (removed first), then the matmul peak
// on the step's shapes and the memory bandwidth.
func benchTrainOnce(c *ucli.Context, rt *torch.Runtime, opts torch.ModelOptions, dir string, layers int) (bench.TrainStep, error) {
	if err := os.RemoveAll(filepath.Join(dir, "run")); err != nil {
		return bench.TrainStep{}, err
	}
	step, err := runBenchTrain(c, dir)
	if err != nil {
		return step, err
	}
	shape := step.Plan.Agents[0].Agent.Shape
	// A group is one micro-batch: its tokens go through the body's matrices, its response
	// tokens through the lm_head, in chunks of about ChunkLogits logits.
	groups := int64(c.Int("batch"))
	tokens := max(1, int64(step.Metrics.PromptTokens+step.Metrics.Tokens)/groups)
	head := [2]int64{int64(shape.Vocab), int64(shape.Hidden)}
	headRows := max(1, min(int64(step.Metrics.Tokens)/groups, max(1, trainspec.ChunkLogits/head[0])))
	if step.PeakFLOPS, step.MatmulShape, step.DType, err = benchMatmulPeak(rt, opts, shape.MatmulShapes(), func(w [2]int64) int64 {
		if w == head {
			return headRows
		}
		return tokens
	}); err != nil {
		return step, err
	}
	return step, benchTrainLimits(c, rt, layers, &step)
}

// benchTrainModel writes the model to train into dir (dir/hf) and names it.
func benchTrainModel(dir, preset string, shape *model.Shape) (string, error) {
	name, label := "qwen2", "tiny qwen2"
	if shape != nil {
		name, label = string(shape.Arch), "random "+preset
		if full := model.Presets[preset].Layers; shape.Layers < full {
			label += fmt.Sprintf(", %d of %d layers", shape.Layers, full)
		}
	}
	fam, err := chat.ForArch(name)
	if err != nil {
		return "", err
	}
	tmpl, err := chat.Template(fam)
	if err != nil {
		return "", err
	}
	return label, model.WriteTiny(dir, model.TinyOptions{Arch: name, Shape: shape, Seed: 1, ChatTemplate: tmpl})
}

// runBenchTrain trains dir/hf with umad train itself, in this process (its progress and
// plan on stderr), and returns its last step with the run's memory plan and peak RSS.
func runBenchTrain(c *ucli.Context, dir string) (bench.TrainStep, error) {
	var step bench.TrainStep
	run := filepath.Join(dir, "run")
	args := []string{"train", "--agent", filepath.Join(dir, "hf"), "--algo", "grpo", "--turns", "1",
		"--synthetic", fmt.Sprint(c.Int("steps") * c.Int("batch")), "--val-synthetic", "0", "--out", run}
	for _, f := range benchTrainShape {
		args = append(args, "--"+f, c.String(f))
	}
	for _, f := range benchTrainPassed {
		if c.IsSet(f) {
			args = append(args, "--"+f+"="+c.String(f))
		}
	}
	debug.FreeOSMemory() // the generated model's buffers are no part of the run's peak
	if err := sysmem.ResetPeakRSS(); err != nil {
		return step, fmt.Errorf("peak memory: %w", err)
	}
	err := resolveCommand(args, func(tc *ucli.Context) error {
		tc.App.Writer, tc.App.ErrWriter = c.App.ErrWriter, c.App.ErrWriter
		var err error
		step.Plan, err = train(tc)
		return err
	})
	if err != nil {
		return step, fmt.Errorf("train: %w", err)
	}
	if step.PeakRSS, err = sysmem.PeakRSS(); err != nil {
		return step, err
	}
	if step.Plan == nil || len(step.Plan.Agents) != 1 {
		return step, errors.New("train left no memory plan of one agent")
	}
	train, _, err := trainlog.Read(filepath.Join(run, trainlog.File))
	if err != nil {
		return step, err
	}
	if len(train) == 0 {
		return step, errors.New("train logged no step")
	}
	step.Metrics = train[len(train)-1] // one agent, one turn: a line per step
	step.Step = step.Metrics.Step
	return step, nil
}

// benchMatmulPeak is the best FLOP/s of libtorch's matrix products on the trainer's
// device, dtype and threads at the step's own shapes: for each weight matrix [out, in] and
// the rows a micro-batch multiplies it by, the forward (rows x in by in x out), the input's
// gradient (rows x out by out x in) and the weight's (out x rows by rows x in), each the
// best of repeats until it stops improving. No phase made of these products can exceed it.
func benchMatmulPeak(rt *torch.Runtime, opts torch.ModelOptions, weights [][2]int64, rowsOf func([2]int64) int64) (flops float64, shape, dtype string, err error) {
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

// benchTrainLimits sizes the model's work from the plan and measures the memory bandwidth
// where llama.cpp decodes.
func benchTrainLimits(c *ucli.Context, rt *torch.Runtime, layers int, step *bench.TrainStep) error {
	a := step.Plan.Agents[0].Agent
	step.LoRA, step.MatmulParams = a.LoRA.Rank > 0, a.Shape.MatmulParams()
	step.HeadParams = int64(a.Shape.Vocab) * int64(a.Shape.Hidden)
	var err error
	if step.RolloutBytes, err = a.Shape.DecodeBytes(a.RolloutType); err != nil {
		return err
	}
	step.ParallelSeqs = min(a.Slots, c.Int("batch")*c.Int("g"))
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

// benchTrainDevice names where the step trained and rolled out.
func benchTrainDevice(d trainspec.Device, layers int) string {
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
// without --profile.
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
