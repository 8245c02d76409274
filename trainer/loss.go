package trainer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/umad-dev/umad/trainspec"
)

// PolicyLoss is a policy loss (--loss) with its clip range and aggregation: those its paper
// trains with, which the flags default to, or a run's. The policy loss is an axis of its own: every algorithm's
// advantages can drive any of them.
type PolicyLoss struct {
	Loss              trainspec.Loss
	ClipLow, ClipHigh float64
	ClipC             float64 // dual clip for A<0; 0 for a loss that has none
	Agg               trainspec.AggMode
	about             string // what it computes, for help texts
	// weightClip: the clip bounds a weight, not a trust region, so ClipLow may be 1 (no
	// lower bound).
	weightClip bool
}

// policyLosses are the policy losses, in the order help texts list them.
var policyLosses = []PolicyLoss{
	{Loss: trainspec.LossPPO, ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3, Agg: trainspec.TokenMean,
		about: "per-token ratio in a clipped surrogate: a clipped token gets no gradient"},
	// GSPO's paper (Zheng et al. 2025) clips its sequence ratio to [1-3e-4, 1+4e-4] and
	// averages over sequences.
	{Loss: trainspec.LossGSPO, ClipLow: 3e-4, ClipHigh: 4e-4, Agg: trainspec.SeqMeanTokenMean,
		about: "per-sequence ratio exp(mean token log-ratio), clipped per sequence (GSPO)"},
	// MiniMax-M1 sets no lower bound on the weight and tunes only the upper one, which it
	// does not publish; 0.28 is DAPO's clip-higher, the value trinity-rft's CISPO defaults to.
	{Loss: trainspec.LossCISPO, ClipLow: 1, ClipHigh: 0.28, Agg: trainspec.TokenMean, weightClip: true,
		about: "per-token ratio as a clipped, stop-gradient weight on the log-prob: every token gets a gradient (CISPO)"},
}

// PolicyLosses lists the policy losses in a fixed order.
func PolicyLosses() []PolicyLoss { return slices.Clone(policyLosses) }

// LossNames lists the policy losses' names in the same order.
func LossNames() []string {
	names := make([]string, len(policyLosses))
	for i, r := range policyLosses {
		names[i] = string(r.Loss)
	}
	return names
}

// LookupLoss returns a policy loss with its paper's settings; "" is ppo.
func LookupLoss(l trainspec.Loss) (PolicyLoss, error) {
	if l == "" {
		l = trainspec.LossPPO
	}
	for _, r := range policyLosses {
		if r.Loss == l {
			return r, nil
		}
	}
	return PolicyLoss{}, fmt.Errorf("unknown policy loss %q (want %s)", string(l), strings.Join(LossNames(), ", "))
}

// Describe says what the loss does and what it defaults to, for help texts.
func (r PolicyLoss) Describe() string {
	s := fmt.Sprintf("%s; clip %g/%g", r.about, r.ClipLow, r.ClipHigh)
	if r.ClipC != 0 {
		s += fmt.Sprintf(", dual clip %g", r.ClipC)
	}
	return s + ", " + string(r.Agg)
}

// LossHelp lists every policy loss with its description, one per line.
func LossHelp() string {
	var b strings.Builder
	for _, r := range policyLosses {
		fmt.Fprintf(&b, "  %-15s %s\n", r.Loss, r.Describe())
	}
	return b.String()
}
