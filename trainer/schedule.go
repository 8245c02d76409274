package trainer

import (
	"fmt"
	"math"
)

// Schedule scales the learning rate per training step: a linear warm-up over
// WarmupSteps (step s of the warm-up uses s/WarmupSteps of it), then constant or a cosine
// decay that reaches MinRatio of it at the last step. Every optimizer step of one
// training step uses the same rate, as verl's per-update scheduler does.
type Schedule struct {
	Kind        string  `json:"kind"` // "constant" or "cosine"
	WarmupSteps int     `json:"warmup_steps"`
	MinRatio    float64 `json:"min_ratio"`
}

// Schedule kinds.
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
)

func (s Schedule) check() error {
	switch {
	case s.Kind != "" && s.Kind != ScheduleConstant && s.Kind != ScheduleCosine:
		return fmt.Errorf("unknown learning-rate schedule %q (want %s or %s)", s.Kind, ScheduleConstant, ScheduleCosine)
	case s.WarmupSteps < 0:
		return fmt.Errorf("warm-up steps must not be negative, got %d", s.WarmupSteps)
	case s.MinRatio < 0 || s.MinRatio > 1:
		return fmt.Errorf("the minimum learning-rate ratio must be in [0, 1], got %g", s.MinRatio)
	}
	return nil
}

// Factor is the multiplier of the base learning rate at training step (1-based) of steps.
func (s Schedule) Factor(step, steps int) float64 {
	if step <= s.WarmupSteps {
		return float64(step) / float64(s.WarmupSteps)
	}
	if s.Kind != ScheduleCosine {
		return 1
	}
	span := steps - s.WarmupSteps
	if span <= 0 {
		return 1
	}
	progress := float64(step-s.WarmupSteps) / float64(span)
	return s.MinRatio + (1-s.MinRatio)*0.5*(1+math.Cos(math.Pi*progress))
}
