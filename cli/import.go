package cli

// Starting a LoRA run from a PEFT adapter: `--agent PEFT_DIR` (its config names the base) or
// `--agent BASE_DIR,adapter=PEFT_DIR`; hfmodel checks each adapter, before the memory plan
// or any loading.

import (
	"fmt"

	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/trainspec"
)

// importAdapters resolves the agents that start from a PEFT adapter: each one's Model
// becomes its base directory and Adapter the adapter directory, after checking the adapter
// against the base's shapes and against the run's LoRA settings (hfmodel.ImportAdapter).
// Without --lora-rank (lora.Rank 0) the first adapter's rank, alpha and targets become the
// run's, and every further adapter must match them; dropout and the base's type stay
// lora's (the flags'). It returns the run's LoRA settings.
func importAdapters(agents []agentSpec, lora trainspec.LoRA) (trainspec.LoRA, error) {
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
