package run

// The LoRA settings of a training run (umad train's, umad sft's), as their flags give them.

import (
	"fmt"

	"github.com/umad-dev/umad/trainspec"
)

// LoRARequest are the LoRA settings as flags give them (--lora-*), and which were given.
type LoRARequest struct {
	Rank           int
	Alpha, Dropout float64
	Targets        string
	BF16Base       bool
	Given          func(name string) bool
}

// Settings are the LoRA settings; rank 0 gives full fine-tuning, and then no other LoRA
// flag may be given, except --lora-dropout and --lora-bf16-base when fromAdapter: a run that
// starts from a PEFT adapter takes its rank, alpha and targets from it
// (TrainSettings.Resolve) but dropout and the base's type from the flags (the caller
// refuses them if no adapter comes).
func (r LoRARequest) Settings(fromAdapter bool) (trainspec.LoRA, error) {
	rank := r.Rank
	if rank == 0 {
		for _, f := range []string{"lora-alpha", "lora-targets", "lora-dropout", "lora-bf16-base"} {
			if r.Given(f) && !(fromAdapter && (f == "lora-dropout" || f == "lora-bf16-base")) {
				return trainspec.LoRA{}, fmt.Errorf("--%s needs --lora-rank (LoRA is off at rank 0)", f)
			}
		}
		l := trainspec.LoRA{Dropout: r.Dropout, BaseBF16: r.BF16Base}
		if !(l.Dropout >= 0 && l.Dropout < 1) {
			return trainspec.LoRA{}, fmt.Errorf("--lora-dropout must be in [0, 1), got %v", l.Dropout)
		}
		return l, nil
	}
	if rank < 0 {
		return trainspec.LoRA{}, fmt.Errorf("--lora-rank must be at least 0 (0 = full fine-tuning), got %d", rank)
	}
	targets, err := trainspec.ParseLoRATargets(r.Targets)
	if err != nil {
		return trainspec.LoRA{}, fmt.Errorf("--lora-targets: %w", err)
	}
	l := trainspec.LoRA{Rank: rank, Alpha: 2 * float64(rank), Targets: targets, Dropout: r.Dropout, BaseBF16: r.BF16Base}
	if r.Given("lora-alpha") {
		l.Alpha = r.Alpha
	}
	if err := l.Check(0); err != nil {
		return trainspec.LoRA{}, fmt.Errorf("--lora-*: %w", err)
	}
	return l, nil
}

// lora is the request's LoRA settings.
func (r *TrainRequest) lora() LoRARequest {
	return LoRARequest{Rank: r.LoRARank, Alpha: r.LoRAAlpha, Dropout: r.LoRADropout, Targets: r.LoRATargets, BF16Base: r.LoRABF16Base,
		Given: func(name string) bool { return r.given[name] }}
}

// CheckLoRARank refuses a rank above the hidden size of the model at path: such an adapter
// costs more than full fine-tuning.
func CheckLoRARank(l trainspec.LoRA, hidden int, path string) error {
	if err := l.Check(hidden); err != nil {
		return fmt.Errorf("--lora-rank with %s: %w", path, err)
	}
	return nil
}
