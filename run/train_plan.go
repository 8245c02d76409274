package run

// The memory plan of a training run: printed at the start of every run (and alone by a
// dry run), and a run that cannot fit is refused before anything loads.

import (
	"fmt"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/memplan"
)

// budget is MemoryBudget or MemAvailable, and the GPUs' free memory when the plan puts
// anything there (unset on the CPU).
func (t *Train) budget(p *memplan.Plan) memplan.Budget {
	b := memplan.Budget{Host: t.MemoryBudget}
	if b.Host == 0 {
		if n, ok := sysmem.Available(); ok {
			b.Host = n
		}
	}
	if dev, _, _ := p.Peak(true); dev > 0 {
		for _, d := range engine.Devices() {
			if d.Kind == "gpu" {
				b.Device += int64(d.FreeBytes)
			}
		}
	}
	return b
}

// Plan prints the memory plan of one rank of job (on Stdout for a dry run, else on Stderr)
// and refuses a run that does not fit, unless NoMemoryCheck, with one line saying what to
// change; a dry run is refused as the run would be, so that a script can tell. A dry run of
// several ranks also prints each placement's figures per rank. rt is the plugin the run
// trains with (its libtorch version decides the attention's memory). The plan is returned
// also when the run is refused.
func (t *Train) Plan(rt *torch.Runtime, job launch.Spec) (*memplan.Plan, error) {
	cfg := t.Config()
	agents, err := cfg.MemoryPlan(rt.TorchVersion())
	if err != nil {
		return nil, err
	}
	agents = memplan.Place(agents, t.Placement, job.World)
	p, err := memplan.RankPlan(agents, t.Placement, job.World)
	if err != nil {
		return nil, err
	}
	if t.Placement.Offload && !t.Placement.Device.CUDA {
		fmt.Fprintln(t.Stderr, "umad: warning: --offload optimizer on the CPU: the AdamW moments are in host memory already; it only adds copies")
	}
	b := t.budget(p)
	w := t.Stderr
	if t.DryRun {
		w = t.Stdout
	}
	p.Write(w, b)
	if t.DryRun && job.World > 1 {
		// Each rank of the machine gets its share of the host and of the GPUs.
		local := int64(max(1, job.LocalWorld))
		if err := memplan.WritePlacements(w, agents, job.World, memplan.Budget{Host: b.Host / local, Device: b.Device / local}); err != nil {
			return p, err
		}
	}
	if p.Fits(b) {
		return p, nil
	}
	advice, err := memplan.Advice(agents, b)
	switch {
	case err != nil:
		return p, err
	case t.NoMemoryCheck:
		fmt.Fprintln(w, "starting anyway (--no-memory-check): "+advice)
		return p, nil
	}
	return p, fmt.Errorf("memory plan: %s (or pass --no-memory-check)", advice)
}
