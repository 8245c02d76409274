package trainspec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// LoRA configures low-rank adapters, PEFT's: each target projection W x becomes
// W x + Alpha/Rank B A dropout(x), with A [Rank, in] kaiming-uniform from Seed and B
// [out, Rank] zeros, so a new adapter changes nothing. Only A and B train.
type LoRA struct {
	Rank  int     `json:"rank"`
	Alpha float64 `json:"alpha"`
	// Targets are short names from LoRATargets.
	Targets []string `json:"targets"`
	// Dropout on the adapter input during training passes, in [0, 1).
	Dropout float64 `json:"dropout"`
	// Seed draws the adapters' initialisation and dropout masks.
	Seed uint64 `json:"seed,omitempty"`
	// BaseBF16 keeps the frozen base in bf16 (half the memory of fp32; exact when the
	// checkpoint is bf16). Computation stays in the parameter dtype.
	BaseBF16 bool `json:"bf16_base,omitempty"`
}

// LoRATargets are the projections an adapter may target, by the short names umad's flags
// use (q for Hugging Face's q_proj), in the order a layer applies them, which is also the
// order of the plugin's target mask bits (UMAD_LORA_* in kernels/umad_torch.h). The one
// list: model derives the HF module names from it.
var LoRATargets = []string{"q", "k", "v", "o", "gate", "up", "down"}

// LoRAShort is a target module's short name (q_proj -> q).
func LoRAShort(module string) string { return strings.TrimSuffix(module, "_proj") }

// ParseLoRATargets reads a comma-separated target list of short names (q,k,v,o,gate,up,down)
// or HF module names (q_proj, ...), or "all", into short names.
func ParseLoRATargets(list string) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		return slices.Clone(LoRATargets), nil
	}
	var out []string
	for _, f := range strings.Split(list, ",") {
		t := LoRAShort(strings.TrimSpace(f))
		if !slices.Contains(LoRATargets, t) {
			return nil, fmt.Errorf("unknown LoRA target %q: choose from %s (or all)", strings.TrimSpace(f), strings.Join(LoRATargets, ","))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Check validates the settings against a model's hidden size (hidden 0: not known yet).
func (l LoRA) Check(hidden int) error {
	switch {
	case l.Rank == 0:
		return nil
	case l.Rank < 0:
		return fmt.Errorf("LoRA rank must be at least 0 (0 = full fine-tuning), got %d", l.Rank)
	case hidden > 0 && l.Rank > hidden:
		return fmt.Errorf("LoRA rank %d exceeds the model's hidden size %d (a rank that large is full fine-tuning at more cost)", l.Rank, hidden)
	case math.IsNaN(l.Alpha) || math.IsInf(l.Alpha, 0) || !(l.Alpha > 0):
		return fmt.Errorf("LoRA alpha must be positive and finite, got %v", l.Alpha)
	case !(l.Dropout >= 0 && l.Dropout < 1):
		return fmt.Errorf("LoRA dropout must be in [0, 1), got %v", l.Dropout)
	case len(l.Targets) == 0:
		return errors.New("LoRA needs at least one target projection")
	}
	_, err := l.Mask()
	return err
}

// Mask is the targets as bits in LoRATargets' order, the plugin's target mask.
func (l LoRA) Mask() (int32, error) {
	var m int32
	for _, t := range l.Targets {
		i := slices.Index(LoRATargets, t)
		if i < 0 {
			return 0, fmt.Errorf("unknown LoRA target %q: choose from %s", t, strings.Join(LoRATargets, ","))
		}
		m |= 1 << i
	}
	return m, nil
}

// LoRAModule is a short name's HF module name (q -> q_proj).
func LoRAModule(short string) string { return short + "_proj" }
