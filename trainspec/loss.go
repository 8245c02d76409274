package trainspec

import "fmt"

// AggMode is how per-token losses become one number (verl's loss_agg_mode).
type AggMode string

const (
	TokenMean           AggMode = "token-mean"              // masked mean over all tokens
	SeqMeanTokenSum     AggMode = "seq-mean-token-sum"      // mean over sequences of token sums
	SeqMeanTokenMean    AggMode = "seq-mean-token-mean"     // mean over sequences of token means
	SeqMeanTokenSumNorm AggMode = "seq-mean-token-sum-norm" // Dr.GRPO: token sum / a constant length
)

// Check reports a mode the plugin does not know.
func (a AggMode) Check() error {
	switch a {
	case "", TokenMean, SeqMeanTokenSum, SeqMeanTokenMean, SeqMeanTokenSumNorm:
		return nil
	}
	return fmt.Errorf("unknown loss aggregation %q (want token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm)", string(a))
}

// KLEstimator is a per-token estimator of KL(policy || reference) from sampled tokens.
type KLEstimator string

const (
	KLK1 KLEstimator = "k1" // log p - log q ("kl")
	KLK2 KLEstimator = "k2" // (log p - log q)^2 / 2 ("mse")
	KLK3 KLEstimator = "k3" // exp(q/p) - log(q/p) - 1, clamped ("low_var_kl")
)

// Loss names a policy loss of the plugin's table (kernels/umad_losses.cpp). It crosses the
// C ABI as a name, with settings that are the same for every loss, so a new loss there
// needs no change to the ABI; the plugin refuses a name it does not have.
type Loss string

const (
	LossPPO   Loss = "ppo"   // dual-clip PPO on each token's ratio
	LossGSPO  Loss = "gspo"  // PPO's clip on one ratio per sequence (GSPO)
	LossCISPO Loss = "cispo" // the clipped ratio as a stop-gradient weight of each log-prob (CISPO)
)

// LossConfig configures the policy loss. The zero value of each field is verl's default
// except where noted.
type LossConfig struct {
	Loss        Loss    // "" is ppo
	Temperature float64 // logits are divided by it; required
	ClipLow     float64 // ratio lower clip 1-ClipLow (0.2 in the reference)
	ClipHigh    float64 // ratio upper clip 1+ClipHigh (DAPO clip-higher raises it)
	ClipC       float64 // dual clip for A<0 (3.0 in the reference); 0 disables
	Agg         AggMode
	// NormLength divides the token sum in seq-mean-token-sum-norm; 0 uses the longest
	// response of the micro-batch, as verl does.
	NormLength  float64
	KL          KLEstimator
	KLCoef      float64 // KL-to-reference in the loss; needs the batch's reference log-probs (torch.PolicyBatch.RefLogp)
	EntropyCoef float64 // entropy bonus (subtracted from the loss)
}
