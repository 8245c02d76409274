package hfmodel

// Starting a LoRA run from a PEFT adapter: everything that can be wrong with the adapter
// is checked here, before the memory plan or any loading.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/trainspec"
)

// IsAdapter reports whether dir is a PEFT adapter directory (it holds the adapter's config).
func IsAdapter(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, peft.ConfigFile))
	return err == nil
}

// ImportAdapter checks the PEFT adapter in dir against its base's shapes and the run's
// LoRA settings, and returns the base directory (base, or the one the adapter names when
// base is "") and the LoRA settings it trains with (the adapter's where lora.Rank is 0).
func ImportAdapter(dir, base string, lora trainspec.LoRA) (string, trainspec.LoRA, error) {
	p, err := peft.Read(dir)
	if err != nil {
		return base, lora, err
	}
	if base, err = adapterBaseFor(dir, base, p); err != nil {
		return base, lora, err
	}
	hc, err := model.LoadHFConfig(base)
	if err != nil {
		return base, lora, err
	}
	s, err := hc.Shape()
	if err != nil {
		return base, lora, fmt.Errorf("%s: %w", base, err)
	}
	if err := p.CheckBase(s); err != nil {
		return base, lora, fmt.Errorf("the adapter %s does not fit the base %s: %w", dir, base, err)
	}
	l, err := AdapterSettings(dir, p, lora)
	if err != nil {
		return base, lora, fmt.Errorf("%w (the run's LoRA settings come from --lora-rank/--lora-alpha/--lora-targets, or from the first agent's adapter)", err)
	}
	return base, l, nil
}

// adapterBaseFor is the adapter's base: the one it names when given is "", else given,
// which must be the local base the adapter names, if it names one.
func adapterBaseFor(dir, given string, p *peft.LoRAAdapter) (string, error) {
	if given == "" {
		base, err := AdapterBase(dir, p)
		if err != nil {
			return "", fmt.Errorf("%w; give the base as --agent BASE_DIR,adapter=%s", err, dir)
		}
		return base, nil
	}
	if base, err := AdapterBase(dir, p); err == nil {
		// A local base the adapter names must be the base given: another is another model.
		named, err1 := os.Stat(base)
		have, err2 := os.Stat(given)
		if err1 != nil || err2 != nil || !os.SameFile(named, have) {
			return given, fmt.Errorf("the adapter %s was trained on %s, not on %s", dir, base, given)
		}
	}
	return given, nil
}
