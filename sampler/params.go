package sampler

import (
	"errors"
	"fmt"
	"math"
)

// ErrParams is wrapped by every error that rejects sampling parameters.
var ErrParams = errors.New("invalid sampling parameters")

// ErrLogits is wrapped by every error that rejects a row of logits.
var ErrLogits = errors.New("invalid logits")

// Params are the sampling parameters of one sequence. The zero value is not
// valid (top-p 0 keeps nothing); start from Params{Temperature: 1, TopP: 1}.
type Params struct {
	// Temperature divides the logits; 0 means greedy (argmax).
	Temperature float64
	// TopK keeps the k most probable tokens; 0 turns it off.
	TopK int
	// TopP keeps the smallest most-probable prefix with at least this much of
	// the (top-k) probability mass; 1 turns it off.
	TopP float64
	// MinP drops tokens less probable than MinP times the most probable
	// token; 0 turns it off.
	MinP float64
}

// Validate reports the first parameter that is out of range. Every Sample
// call validates its parameters; call Validate to reject a configuration
// before a run starts.
func (p Params) Validate() error {
	t := p.Temperature
	switch {
	case math.IsNaN(t) || t < 0 || math.IsInf(t, 1):
		return fmt.Errorf("%w: temperature %v: want a finite value >= 0 (0 = greedy)", ErrParams, t)
	case t > 0 && math.IsInf(1/t, 1):
		return fmt.Errorf("%w: temperature %v is too small to divide by: use 0 for greedy", ErrParams, t)
	case p.TopK < 0:
		return fmt.Errorf("%w: top-k %d: want >= 0 (0 = off)", ErrParams, p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("%w: top-p %v: want 0 < top-p <= 1 (1 = off)", ErrParams, p.TopP)
	case !(p.MinP >= 0 && p.MinP < 1):
		return fmt.Errorf("%w: min-p %v: want 0 <= min-p < 1 (0 = off)", ErrParams, p.MinP)
	}
	return nil
}
