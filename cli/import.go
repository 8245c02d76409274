package cli

// Starting a LoRA run from a PEFT adapter: `--agent PEFT_DIR` (its config names the base) or
// `--agent BASE_DIR,adapter=PEFT_DIR`. Everything that can be wrong with the adapter is
// checked here, before the memory plan or any loading.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/model"
)

// importAdapters resolves the agents that start from a PEFT adapter: each one's Model
// becomes its base directory and Adapter the adapter directory, after checking the adapter
// against the base's shapes and against the run's LoRA settings. Without --lora-rank
// (lora.Rank 0) the first adapter's rank, alpha and targets become the run's, and every
// further adapter must match them; dropout and the base's type stay lora's (the flags').
// It returns the run's LoRA settings.
func importAdapters(agents []agentSpec, lora torch.LoRA) (torch.LoRA, error) {
	for i := range agents {
		a := &agents[i]
		if a.Adapter == "" {
			if _, err := os.Stat(filepath.Join(a.Model, model.PEFTConfigFile)); err != nil {
				continue
			}
			a.Adapter, a.Model = a.Model, ""
		}
		l, err := importAdapter(a, lora)
		if err != nil {
			return lora, fmt.Errorf("agent %d (%s): %w", i, a.Name, err)
		}
		if lora.Rank == 0 {
			lora = l
		}
	}
	return lora, nil
}

// importAdapter checks one agent's adapter, sets its base when the adapter names it, and
// returns the LoRA settings it trains with.
func importAdapter(a *agentSpec, lora torch.LoRA) (torch.LoRA, error) {
	p, err := model.ReadPEFT(a.Adapter)
	if err != nil {
		return lora, err
	}
	if a.Model == "" {
		if a.Model, err = hfmodel.AdapterBase(a.Adapter, p); err != nil {
			return lora, fmt.Errorf("%w; give the base as --agent BASE_DIR,adapter=%s", err, a.Adapter)
		}
	} else if base, err := hfmodel.AdapterBase(a.Adapter, p); err == nil {
		// A local base the adapter names must be the base given: another is another model.
		named, err1 := os.Stat(base)
		given, err2 := os.Stat(a.Model)
		if err1 != nil || err2 != nil || !os.SameFile(named, given) {
			return lora, fmt.Errorf("the adapter %s was trained on %s, not on %s", a.Adapter, base, a.Model)
		}
	}
	hc, err := model.LoadHFConfig(a.Model)
	if err != nil {
		return lora, err
	}
	s, err := hc.Shape()
	if err != nil {
		return lora, fmt.Errorf("%s: %w", a.Model, err)
	}
	if err := p.CheckBase(s); err != nil {
		return lora, fmt.Errorf("the adapter %s does not fit the base %s: %w", a.Adapter, a.Model, err)
	}
	l, err := hfmodel.AdapterSettings(a.Adapter, p, lora)
	if err != nil {
		return lora, fmt.Errorf("%w (the run's LoRA settings come from --lora-rank/--lora-alpha/--lora-targets, or from the first agent's adapter)", err)
	}
	return l, nil
}
