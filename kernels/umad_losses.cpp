// The policy losses of libumad_torch, registered by name in one table, as verl's
// core_algos.py registers its losses. umad_policy_loss (umad_passes.cpp) runs the forward,
// finds the loss here by the name in umad_policy_params, and applies what every loss
// shares: the truncated importance-sampling weights, the aggregation, the KL and entropy
// terms and the statistics. A new loss is one function below and one line in the table;
// it reads its settings from umad_policy_params, which does not change with it.

#include <torch/torch.h>

#include <cstring>
#include <string>

#include "umad_internal.h"

namespace umad {

at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask) {
  return (x * mask).sum() / mask.sum().clamp_min(1e-8);
}

namespace {

using torch::Tensor;

// check_clip_range refuses a clip range around a ratio that is not [<=1, >=1] with a
// positive lower end.
void check_clip_range(const umad_policy_params& p) {
  if (p.clip_low < 0 || p.clip_low >= 1 || p.clip_high < 0)
    throw ArgError("clip range must satisfy 0 <= clip_low < 1 and clip_high >= 0");
}

// fraction is the share of masked-in tokens where flags holds.
Tensor fraction(const Tensor& flags, const PolicyTokens& t) {
  return masked_mean(flags.to(t.logp.scalar_type()), t.mask);
}

// ppo: the dual-clip PPO loss of each token, max(-A r, -A clip(r, 1-clip_low, 1+clip_high)),
// with r the token's ratio pi/pi_old, bounded by -A clip_c where A < 0 (clip_c 0: no bound).
PolicyTerms ppo(const umad_policy_params& p, const PolicyTokens& t) {
  check_clip_range(p);
  if (p.clip_c != 0 && p.clip_c <= 1) throw ArgError("dual clip c must exceed 1");
  auto ratio = t.log_ratio.exp();
  auto l1 = -t.adv * ratio;
  auto l2 = -t.adv * ratio.clamp(1 - p.clip_low, 1 + p.clip_high);
  auto clipped = torch::max(l1, l2);
  PolicyTerms out{clipped, fraction(l2 > l1, t), torch::zeros({}, t.logp.options())};
  if (p.clip_c != 0) {
    auto l3 = -t.adv * p.clip_c;
    auto neg = t.adv < 0;
    out.per_token = torch::where(neg, torch::min(clipped, l3), clipped);
    out.clipfrac_lower = fraction((clipped > l3).logical_and(neg), t);
  }
  return out;
}

// gspo (Zheng et al. 2025, GSPO): one ratio per sequence, the geometric mean of its tokens'
// ratios, s = exp(mean over the sequence's masked-in tokens of log(pi/pi_old)), clipped per
// sequence as ppo clips a token's: max(-A s, -A clip(s, 1-clip_low, 1+clip_high)). The
// gradient flows through the mean, so every token of a sequence moves with it; each token
// carries its sequence's loss, and seq-mean-token-mean makes that the paper's mean over
// sequences. No dual clip.
PolicyTerms gspo(const umad_policy_params& p, const PolicyTokens& t) {
  check_clip_range(p);
  if (p.clip_c != 0) throw ArgError("gspo has no dual clip: clip_c must be 0");
  auto per_seq = torch::zeros({t.n_seqs}, t.logp.options());
  auto count = per_seq.index_add(0, t.seg, t.mask).clamp_min(1);
  auto ratio = (per_seq.index_add(0, t.seg, t.log_ratio * t.mask) / count).exp().index_select(0, t.seg);
  auto l1 = -t.adv * ratio;
  auto l2 = -t.adv * ratio.clamp(1 - p.clip_low, 1 + p.clip_high);
  return {torch::max(l1, l2), fraction(l2 > l1, t), torch::zeros({}, t.logp.options())};
}

// cispo (MiniMax-M1, 2025, CISPO): each token's ratio r clipped to [1-clip_low, 1+clip_high]
// and held constant (a stop-gradient) as the weight of its log-prob, -sg(clip(r)) A log pi:
// a clipped token still gets a gradient, where ppo's clipped surrogate drops it. clip_low 1
// leaves the weight no lower bound, as the paper trains. No dual clip.
PolicyTerms cispo(const umad_policy_params& p, const PolicyTokens& t) {
  if (p.clip_low < 0 || p.clip_low > 1 || p.clip_high < 0)
    throw ArgError("cispo's clip range must satisfy 0 <= clip_low <= 1 and clip_high >= 0");
  if (p.clip_c != 0) throw ArgError("cispo has no dual clip: clip_c must be 0");
  auto ratio = t.log_ratio.exp().detach();
  auto weight = ratio.clamp(1 - p.clip_low, 1 + p.clip_high);
  return {-t.adv * weight * t.logp, fraction(weight != ratio, t), torch::zeros({}, t.logp.options())};
}

// The table: each loss by the name the C ABI and `umad train --loss` give it.
const struct {
  const char* name;
  PolicyLoss fn;
} kLosses[] = {
    {"ppo", ppo},
    {"gspo", gspo},
    {"cispo", cispo},
};

}  // namespace

PolicyLoss find_policy_loss(const char* name) {
  std::string names;
  for (const auto& l : kLosses) {
    if (name != nullptr && std::strcmp(name, l.name) == 0) return l.fn;
    names += names.empty() ? l.name : std::string(", ") + l.name;
  }
  throw ArgError("unknown policy loss \"" + std::string(name ? name : "") + "\" (this plugin has " + names + ")");
}

}  // namespace umad
