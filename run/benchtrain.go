package run

// `umad bench train` as a typed value: one whole training step of a training request, run
// on a temporary random-weight model and timed by phase against the machine's limits
// measured in the same run (benchtrain_limits.go).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/umad-dev/umad/bench"
	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainlog"
	"github.com/umad-dev/umad/trainspec"
)

// TrainBench is `umad bench train`: Runs whole runs of `umad train --algo grpo --turns 1`
// (one agent, the built-in synthetic problems, no validation) for Steps steps, each with
// its own matmul peak and memory bandwidth; its table is every figure's min / median / max
// over the runs.
type TrainBench struct {
	// Preset names the random weights' real shape, Shape (its layers kept); nil Shape: a
	// generated tiny qwen2 model.
	Preset string
	Shape  *model.Shape
	// The step's size, always handed on to the run.
	Steps, Batch, G, MaxTokens, PromptLimit int
	Runs                                    int
	// Results is a Markdown file whose Section the table rewrites ("": none).
	Results, Section string
	// Profile is a new or empty directory for libtorch's trace of every trainer call ("": none).
	Profile string
	// Train are umad train's settings handed on to the run, by key (those given).
	Train [][2]string
	// Command is the command line the results record.
	Command string
	// Stdout gets the table (and the profile's), Stderr the runs' progress and plans.
	Stdout, Stderr io.Writer
}

// MaxBenchRuns bounds Runs: each run trains Steps steps.
const MaxBenchRuns = 100

// Check refuses a count below 1 (a benchmark of none printed zeros) and more runs than
// MaxBenchRuns; the errors name the flags.
func (b *TrainBench) Check() error {
	for _, n := range []struct {
		flag string
		v    int
	}{{"runs", b.Runs}, {"steps", b.Steps}, {"batch", b.Batch}, {"g", b.G}, {"max-tokens", b.MaxTokens}, {"prompt-limit", b.PromptLimit}} {
		if n.v < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", n.flag, n.v)
		}
	}
	if b.Runs > MaxBenchRuns {
		return fmt.Errorf("--runs %d: at most %d (each run trains --steps steps)", b.Runs, MaxBenchRuns)
	}
	return nil
}

// Run checks the benchmark, runs it, prints its table and, when every figure is below the
// peak, writes it to Results.
func (b *TrainBench) Run() error {
	if err := b.Check(); err != nil {
		return err
	}
	t, err := b.request("") // the settings handed on, read as the runs will read them
	if err != nil {
		return err
	}
	layers, err := GPULayers(t.GPULayers, t.Keys().IsSet("gpu-layers"))
	if err != nil {
		return err
	}
	if err := CheckThreads("threads", t.Threads); err != nil {
		return err
	}
	rt, opts, err := OpenTorch(t.TorchPlugin, t.TrainDevice, t.DType, t.GradCheckpoint, t.TorchThreads)
	if err == nil {
		err = startProfile(b.Profile, b.Results)
	}
	if err != nil {
		return err
	}
	if err := rt.CheckDevice(trainspec.Device{CUDA: true}); layers > 0 && err != nil {
		return fmt.Errorf("--gpu-layers: the GPU's bandwidth is measured through the torch plugin, which cannot use the GPU: %w", err)
	}
	steps, err := b.runs(rt, opts, layers)
	if err != nil {
		return err
	}
	body, err := bench.TrainSection(steps)
	fmt.Fprint(b.Stdout, body)
	if err != nil {
		return err // nothing written: a figure above the peak is no result
	}
	if err := printProfile(b.Stdout, b.Profile); err != nil {
		return err
	}
	if b.Results != "" {
		return bench.UpdateSection(b.Results, b.Section, body)
	}
	return nil
}

// runs runs the benchmark on its model, written into a temporary directory, and returns
// each run's last step.
func (b *TrainBench) runs(rt *torch.Runtime, opts torch.ModelOptions, layers int) ([]bench.TrainStep, error) {
	dir, err := os.MkdirTemp("", "umad-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	label, err := b.writeModel(dir)
	if err != nil {
		return nil, err
	}
	runs := make([]bench.TrainStep, b.Runs)
	for i := range runs {
		if runs[i], err = b.once(rt, opts, dir, layers); err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		runs[i].Shape, runs[i].Device = label, trainBenchDevice(opts.Device, layers)
		runs[i].Setup = fmt.Sprintf("%d problems x G %d, at most %d tokens", b.Batch, b.G, b.MaxTokens)
		runs[i].Command = b.Command
	}
	return runs, nil
}

// once is one run of the step in dir/run (removed first), then the matmul peak on the
// step's shapes and the memory bandwidth.
func (b *TrainBench) once(rt *torch.Runtime, opts torch.ModelOptions, dir string, layers int) (bench.TrainStep, error) {
	if err := os.RemoveAll(filepath.Join(dir, "run")); err != nil {
		return bench.TrainStep{}, err
	}
	step, err := b.train(dir)
	if err != nil {
		return step, err
	}
	shape := step.Plan.Agents[0].Agent.Shape
	// A group is one micro-batch: its tokens go through the body's matrices, its response
	// tokens through the lm_head, in chunks of about ChunkLogits logits.
	groups := int64(b.Batch)
	tokens := max(1, int64(step.Metrics.PromptTokens+step.Metrics.Tokens)/groups)
	head := [2]int64{int64(shape.Vocab), int64(shape.Hidden)}
	headRows := max(1, min(int64(step.Metrics.Tokens)/groups, max(1, trainspec.ChunkLogits/head[0])))
	if step.PeakFLOPS, step.MatmulShape, step.DType, err = matmulPeak(rt, opts, shape.MatmulShapes(), func(w [2]int64) int64 {
		if w == head {
			return headRows
		}
		return tokens
	}); err != nil {
		return step, err
	}
	return step, b.limits(rt, layers, &step)
}

// writeModel writes the model to train into dir (dir/hf) and names it.
func (b *TrainBench) writeModel(dir string) (string, error) {
	name, label := "qwen2", "tiny qwen2"
	if b.Shape != nil {
		name, label = string(b.Shape.Arch), "random "+b.Preset
		if full := model.Presets[b.Preset].Layers; b.Shape.Layers < full {
			label += fmt.Sprintf(", %d of %d layers", b.Shape.Layers, full)
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
	return label, model.WriteTiny(dir, model.TinyOptions{Arch: name, Shape: b.Shape, Seed: 1, ChatTemplate: tmpl})
}

// request is the training run of the model in dir/hf into dir/run: the step's size and
// the settings handed on, set key by key.
func (b *TrainBench) request(dir string) (*TrainRequest, error) {
	r := NewTrainRequest()
	settings := [][2]string{{"agent", filepath.Join(dir, "hf")}, {"algo", "grpo"}, {"turns", "1"},
		{"synthetic", fmt.Sprint(b.Steps * b.Batch)}, {"val-synthetic", "0"}, {"out", filepath.Join(dir, "run")},
		{"steps", fmt.Sprint(b.Steps)}, {"batch", fmt.Sprint(b.Batch)}, {"g", fmt.Sprint(b.G)},
		{"max-tokens", fmt.Sprint(b.MaxTokens)}, {"prompt-limit", fmt.Sprint(b.PromptLimit)}}
	for _, kv := range append(settings, b.Train...) {
		if err := SetSetting(r.Keys(), kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	r.Stdout, r.Stderr = b.Stderr, b.Stderr
	return r, nil
}

// train trains dir/hf as umad train does, in this process, and returns its last step with
// the run's memory plan and peak RSS.
func (b *TrainBench) train(dir string) (bench.TrainStep, error) {
	var step bench.TrainStep
	r, err := b.request(dir)
	if err != nil {
		return step, err
	}
	debug.FreeOSMemory() // the generated model's buffers are no part of the run's peak
	if err := sysmem.ResetPeakRSS(); err != nil {
		return step, fmt.Errorf("peak memory: %w", err)
	}
	if step.Plan, err = r.Start(); err != nil {
		return step, fmt.Errorf("train: %w", err)
	}
	if step.PeakRSS, err = sysmem.PeakRSS(); err != nil {
		return step, err
	}
	if step.Plan == nil || len(step.Plan.Agents) != 1 {
		return step, errors.New("train left no memory plan of one agent")
	}
	train, _, err := trainlog.Read(filepath.Join(r.Out, trainlog.File))
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
