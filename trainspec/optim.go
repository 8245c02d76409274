package trainspec

// AdamW configures one optimizer step. The learning rate is given per step so a schedule
// lives with the caller.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	MaxGradNorm                        float64 // global-norm clip; <= 0 disables
}

// DefaultAdamW is the reference run's optimizer (lr 1e-6, decay 0.01, clip 1.0).
var DefaultAdamW = AdamW{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1.0}
