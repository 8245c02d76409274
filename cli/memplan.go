package cli

// The memory plan of `umad train`: printed at the start of every run (and alone with
// --dry-run), and a run that cannot fit is refused before anything loads.

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainer"
)

func memoryFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "dry-run", Usage: "print the memory plan (per agent: trainer, reference, activations, llama.cpp weights and KV cache) against the memory available and check the settings and --out, then exit without loading or writing anything; it fails where the run would fail before loading (a plan that does not fit, unless --no-memory-check)"},
		&ucli.BoolFlag{Name: "no-memory-check", Usage: "start even when the memory plan does not fit"},
		&ucli.StringFlag{Name: "memory-budget", DefaultText: "MemAvailable", Usage: "host memory the run may use (e.g. 48GiB), instead of /proc/meminfo's MemAvailable (which ignores container limits)"},
	}
}

// planTrain is the memory plan of a resolved run.
func planTrain(cfg trainer.Config, rt *torch.Runtime) ([]memplan.Agent, error) {
	major, _, _ := strings.Cut(rt.TorchVersion(), ".")
	fused, _ := strconv.Atoi(major)
	var agents []memplan.Agent
	for i, a := range cfg.Agents {
		hc, err := model.LoadHFConfig(a.Dir)
		if err != nil {
			return nil, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		s, err := hc.Shape()
		if err != nil {
			return nil, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		var lora memplan.LoRA
		if cfg.LoRA.Rank > 0 {
			lora = memplan.LoRA{Rank: cfg.LoRA.Rank, Targets: cfg.LoRA.Targets}
			// The frozen base's type as hfmodel.Load picks it.
			bf16 := cfg.LoRA.BaseBF16
			if !bf16 {
				if bf16, err = hfmodel.BF16Checkpoint(a.Dir); err != nil {
					return nil, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
				}
			}
			if bf16 {
				lora.BaseDType = memplan.BF16
			}
		}
		agents = append(agents, memplan.Agent{Name: a.Name, Shape: s, LoRA: lora,
			DType: memplan.DType(cfg.DType), GradCheckpoint: cfg.Torch.GradCheckpoint, CUDA: cfg.Torch.Device.CUDA, FusedAttention: fused >= 2,
			MicroBatchSeqs: cfg.G, PromptTokens: cfg.PromptLimit, ResponseTokens: a.MaxTokens,
			RolloutType: cfg.RolloutDType.GGUFType(), FileSync: cfg.Sync == trainer.SyncFile, Slots: cfg.Engine.Slots, SeqContext: cfg.Engine.SeqContext,
			KVType: string(cfg.Engine.KVType), GPULayers: cfg.Placement.GPULayers})
	}
	return agents, nil
}

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

// checkMemory prints the plan (on stdout for --dry-run, else on stderr) and refuses a run
// that does not fit, unless --no-memory-check, with one line saying what to change; a dry
// run is refused as the run would be, so that a script can tell.
func checkMemory(c *ucli.Context, cfg trainer.Config, rt *torch.Runtime) error {
	agents, err := planTrain(cfg, rt)
	if err != nil {
		return err
	}
	p, err := memplan.New(agents)
	if err != nil {
		return err
	}
	b, err := memoryBudget(c, p)
	if err != nil {
		return err
	}
	w := c.App.ErrWriter
	if c.Bool("dry-run") {
		w = c.App.Writer
	}
	p.Write(w, b)
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
