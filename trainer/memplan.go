package trainer

// A run mapped onto the memory plan (memplan), before anything loads. The mapping lives
// here, not in memplan: it reads this package's Config and the checkpoints' dtypes through
// hfmodel, and memplan stays pure Go below them.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/memplan"
	"github.com/umad-dev/umad/model"
)

// MemoryPlan is the memory plan of a resolved run's agents; torchVersion is the plugin's
// libtorch version (2.x has fused attention).
func (cfg Config) MemoryPlan(torchVersion string) ([]memplan.Agent, error) {
	major, _, _ := strings.Cut(torchVersion, ".")
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
		lora, err := cfg.planLoRA(a.Dir)
		if err != nil {
			return nil, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		agents = append(agents, memplan.Agent{Name: a.Name, Shape: s, LoRA: lora,
			DType: cfg.DType, ModelPlacement: cfg.Placement.ModelPlacement, FusedAttention: fused >= 2,
			MicroBatchSeqs: cfg.G, PromptTokens: cfg.PromptLimit, ResponseTokens: a.MaxTokens,
			RolloutType: cfg.RolloutDType.GGUFType(), FileSync: cfg.Sync == SyncFile, Slots: cfg.Rollout.Engine.Slots, SeqContext: cfg.Rollout.Engine.SeqContext,
			KVType: string(cfg.Rollout.Engine.KVType), GPULayers: cfg.Rollout.Placement.GPULayers})
	}
	return agents, nil
}

// planLoRA is the LoRA of an agent on checkpoint dir, with its frozen base's type as
// hfmodel.Load picks it; none in a full fine-tune.
func (cfg Config) planLoRA(dir string) (memplan.LoRA, error) {
	if cfg.LoRA.Rank == 0 {
		return memplan.LoRA{}, nil
	}
	lora := memplan.LoRA{Rank: cfg.LoRA.Rank, Targets: cfg.LoRA.Targets}
	bf16 := cfg.LoRA.BaseBF16
	if !bf16 {
		var err error
		if bf16, err = hfmodel.BF16Checkpoint(dir); err != nil {
			return lora, err
		}
	}
	if bf16 {
		lora.BaseDType = memplan.BF16
	}
	return lora, nil
}
