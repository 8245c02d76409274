package run

// A training request started: its job's shape and this process's place in it, where
// the training state lives, the plugin opened, the memory planned, and the run.

import (
	"fmt"
	"io"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/interrupt"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/trainspec"
)

// Start resolves the request and runs it, or, with DryRun, plans it; it returns the memory
// plan (nil where it stopped before planning, or started ranks that plan for themselves):
// `umad bench train` compares the run's peak with it.
func (r *TrainRequest) Start() (*memplan.Plan, error) {
	settings, err := r.Resolve()
	if err != nil {
		return nil, err
	}
	if !launch.OwnRank() { // the launcher's ranks run the same command
		WriteRecipe(r.notes(), settings.Recipe, r.Keys(), true)
	}
	job, _, err := r.dist() // the job's shape, which a dry run plans for
	if err != nil {
		return nil, err
	}
	place, err := r.placement(job.World, len(settings.Agents))
	if err != nil {
		return nil, err
	}
	d := launch.Spec{World: 1, LocalWorld: 1}
	if !r.DryRun { // a dry run starts no ranks
		var launched bool
		if d, launched, err = r.launchRanks(settings.Trainer.CheckWorld); launched || err != nil {
			return nil, err
		}
	}
	t, err := r.train(settings, place, d)
	if err != nil {
		return nil, err
	}
	return r.start(t, job, d)
}

// notes is where a run's first lines go: stderr, or stdout for a dry run, as the memory
// plan.
func (r *TrainRequest) notes() io.Writer {
	if r.DryRun {
		return r.Stdout
	}
	return r.Stderr
}

// train is the run of settings as rank d: the engines (their threads shared among the
// ranks of d's machine), the memory check and the output.
func (r *TrainRequest) train(s TrainSettings, place trainspec.Placement, d launch.Spec) (*Train, error) {
	if r.Out == "" {
		return nil, ErrNoOut
	}
	t := &Train{Settings: s, Epochs: r.Epochs, Out: r.Out, Resume: r.Resume, DryRun: r.DryRun, Placement: place,
		CtxGiven: r.given["ctx"], PromptLimitGiven: r.given["prompt-limit"], NoMemoryCheck: r.NoMemoryCheck,
		TorchThreads: r.TorchThreads, ThreadsGiven: r.given["threads"], TorchThreadsGiven: r.given["torch-threads"],
		Command: r.Command, Stdout: r.Stdout, Stderr: r.Stderr}
	var err error
	if t.Rollout.Engine, err = EngineOptions(r.Slots, r.Ctx, r.Threads, r.KVType, r.FlashAttn); err != nil {
		return nil, err
	}
	t.ShareCores(d)
	if t.Rollout.Placement, err = PlaceEngines(r.GPULayers, r.given["gpu-layers"], r.Devices); err != nil {
		return nil, err
	}
	if r.MemoryBudget != "" {
		if t.MemoryBudget, err = memplan.ParseSize(r.MemoryBudget); err != nil {
			return nil, fmt.Errorf("--memory-budget: %w", err)
		}
	}
	return t, nil
}

// start loads and checks the run, opens the plugin (--train-device, --dtype), plans the
// memory of a rank of job and, unless a dry run, trains as rank d; it returns the plan.
func (r *TrainRequest) start(t *Train, job, d launch.Spec) (*memplan.Plan, error) {
	if err := t.Load(); err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	rt, topts, err := OpenTorch(r.TorchPlugin, r.TrainDevice, r.DType, r.GradCheckpoint, t.TorchThreads)
	if err != nil {
		return nil, err
	}
	t.Placement.Device = topts.Device
	// The plan and the directory's checks come before the directory is touched: a dry run or
	// a refusal leaves nothing behind.
	plan, err := t.Plan(rt, job)
	if err != nil {
		return plan, err
	}
	if t.DryRun {
		return plan, t.CheckDir() // what the run would say of --out and --resume
	}
	ctx, release := interrupt.Context("finishing the step and checkpointing (continue with --resume)")
	defer release()
	return plan, t.Run(ctx, rt, d)
}

// OpenTorch loads the plugin (at plugin; "" finds it) with threads libtorch threads and
// resolves the trainer's device (--train-device) and precision (--dtype) into model
// options; a GPU the plugin cannot use is refused here, before anything loads.
func OpenTorch(plugin, device, dtype string, gradCheckpoint bool, threads int) (*torch.Runtime, torch.ModelOptions, error) {
	var opts torch.ModelOptions
	if err := CheckThreads("torch-threads", threads); err != nil {
		return nil, opts, err
	}
	prec, err := trainspec.ParsePrecision(dtype)
	if err != nil {
		return nil, opts, fmt.Errorf("--dtype: %w", err)
	}
	rt, err := torch.Open(torch.Options{Plugin: plugin, Threads: threads})
	if err != nil {
		return nil, opts, err
	}
	dev, err := rt.ResolveDevice(device)
	if err != nil {
		return nil, opts, fmt.Errorf("--train-device: %w", err)
	}
	opts.Device, opts.Precision, opts.GradCheckpoint = dev, prec, gradCheckpoint
	return rt, opts, nil
}
