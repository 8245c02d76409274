package cli

// The memory plan of `umad train`: printed at the start of every run (and alone with
// --dry-run), and a run that cannot fit is refused before anything loads.

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/trainer"
)

func memoryFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "dry-run", Usage: "print the memory plan (per agent: trainer, reference, activations, llama.cpp weights and KV cache) against the memory available and check the settings and --out, then exit without loading or writing anything; it fails where the run would fail before loading (a plan that does not fit, unless --no-memory-check)"},
		&ucli.BoolFlag{Name: "no-memory-check", Usage: "start even when the memory plan does not fit"},
		&ucli.StringFlag{Name: "memory-budget", DefaultText: "MemAvailable", Usage: "host memory the run may use (e.g. 48GiB), instead of /proc/meminfo's MemAvailable (which ignores container limits)"},
	}
}

// memoryPlanKey is where checkMemory leaves the plan in the app's Metadata, when the app
// has one.
const memoryPlanKey = "memplan"

// memoryBudget is --memory-budget or MemAvailable, and the GPUs' free memory when the plan
// puts anything there (unset on the CPU).
func memoryBudget(c *ucli.Context, p *memplan.Plan) (memplan.Budget, error) {
	var b memplan.Budget
	if s := c.String("memory-budget"); s != "" {
		n, err := memplan.ParseSize(s)
		if err != nil {
			return b, fmt.Errorf("--memory-budget: %w", err)
		}
		b.Host = n
	} else if n, ok := sysmem.Available(); ok {
		b.Host = n
	}
	if dev, _, _ := p.Peak(true); dev > 0 {
		for _, d := range engine.Devices() {
			if d.Kind == "gpu" {
				b.Device += int64(d.FreeBytes)
			}
		}
	}
	return b, nil
}

// checkMemory prints the plan of one rank of job (on stdout for --dry-run, else on stderr)
// and refuses a run that does not fit, unless --no-memory-check, with one line saying what
// to change; a dry run is refused as the run would be, so that a script can tell. A dry run
// of several ranks also prints each placement's figures per rank.
func checkMemory(c *ucli.Context, cfg trainer.Config, rt *torch.Runtime, job launch.Spec) error {
	agents, err := cfg.MemoryPlan(rt.TorchVersion())
	if err != nil {
		return err
	}
	agents = memplan.Place(agents, cfg.Placement, job.World)
	p, err := memplan.RankPlan(agents, cfg.Placement, job.World)
	if err != nil {
		return err
	}
	if cfg.Placement.Offload && !cfg.Placement.Device.CUDA {
		fmt.Fprintln(c.App.ErrWriter, "umad: warning: --offload optimizer on the CPU: the AdamW moments are in host memory already; it only adds copies")
	}
	b, err := memoryBudget(c, p)
	if err != nil {
		return err
	}
	if c.App.Metadata != nil { // `umad bench train` compares the run's peak with the plan
		c.App.Metadata[memoryPlanKey] = p
	}
	w := c.App.ErrWriter
	if c.Bool("dry-run") {
		w = c.App.Writer
	}
	p.Write(w, b)
	if c.Bool("dry-run") && job.World > 1 {
		// Each rank of the machine gets its share of the host and of the GPUs.
		local := int64(max(1, job.LocalWorld))
		if err := memplan.WritePlacements(w, agents, job.World, memplan.Budget{Host: b.Host / local, Device: b.Device / local}); err != nil {
			return err
		}
	}
	if p.Fits(b) {
		return nil
	}
	advice, err := memplan.Advice(agents, b)
	switch {
	case err != nil:
		return err
	case c.Bool("no-memory-check"):
		fmt.Fprintln(w, "starting anyway (--no-memory-check): "+advice)
		return nil
	}
	return fmt.Errorf("memory plan: %s (or pass --no-memory-check)", advice)
}
