package run

// A training run's settings completed from what they name: agents that start from a PEFT
// adapter (`--agent PEFT_DIR`, whose config names the base, or `--agent
// BASE_DIR,adapter=PEFT_DIR`), checked by hfmodel before the memory plan or any loading;
// the trainer's agents; a recipe's learning rate under LoRA.

import (
	"fmt"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
)

// Resolve completes the settings: the agents that start from a PEFT adapter
// (importAdapters), LoRA off at rank 0, the trainer's agents from the agents, and a
// learning rate the recipe set scaled for LoRA (scaleLoRALR).
func (s *TrainSettings) Resolve() error {
	var err error
	if s.Trainer.LoRA, err = importAdapters(s.Agents, s.Trainer.LoRA); err != nil {
		return err
	}
	if s.Trainer.LoRA.Rank == 0 {
		s.Trainer.LoRA = trainspec.LoRA{}
	}
	s.Trainer.Agents = nil
	for _, a := range s.Agents {
		s.Trainer.Agents = append(s.Trainer.Agents, trainer.Agent{Name: a.Name, Dir: a.Model, Adapter: a.Adapter, Params: a.Params, MaxTokens: a.MaxTokens,
			SeedOffset: a.SeedOffset, ChatFormat: a.ChatFormat})
	}
	s.scaleLoRALR()
	return nil
}

// importAdapters resolves the agents that start from a PEFT adapter: each one's Model
// becomes its base directory and Adapter the adapter directory, after checking the adapter
// against the base's shapes and against the run's LoRA settings (hfmodel.ImportAdapter).
// Without a LoRA rank (lora.Rank 0) the first adapter's rank, alpha and targets become the
// run's, and every further adapter must match them; dropout and the base's type stay
// lora's. It returns the run's LoRA settings.
func importAdapters(agents []TrainAgent, lora trainspec.LoRA) (trainspec.LoRA, error) {
	for i := range agents {
		a := &agents[i]
		if a.Adapter == "" {
			if !hfmodel.IsAdapter(a.Model) {
				continue
			}
			a.Adapter, a.Model = a.Model, ""
		}
		var l trainspec.LoRA
		var err error
		if a.Model, l, err = hfmodel.ImportAdapter(a.Adapter, a.Model, lora); err != nil {
			return lora, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		if lora.Rank == 0 {
			lora = l
		}
	}
	return lora, nil
}

// scaleLoRALR multiplies the learning rate of a LoRA run whose --lr the recipe set (see
// recipe.LoRALRScale), in the run and in the record. An --lr given explicitly, even with the
// recipe's value, is never changed.
func (s *TrainSettings) scaleLoRALR() {
	if s.Recipe == nil || s.Trainer.LoRA.Rank == 0 {
		return
	}
	for i, v := range s.Recipe.Set {
		if v.Flag == "lr" && !v.Given {
			s.Trainer.Opt.LR = recipe.LoRALR(s.Trainer.Opt.LR)
			s.Recipe.Set[i].Value = fmt.Sprint(s.Trainer.Opt.LR)
			s.Recipe.Set[i].Source += fmt.Sprintf("; x%d for LoRA: %s", recipe.LoRALRScale, recipe.LoRAWhy)
		}
	}
}
