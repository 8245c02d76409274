// The C ABI's passes over a micro-batch: the response tokens' log-probs, the policy loss
// (what every loss of umad_losses.cpp shares: importance weights, aggregation, KL and
// entropy terms, statistics), SFT cross-entropy and the per-token KL estimate.

#include "umad_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace umad;

namespace {

int64_t response_tokens(const umad_seqs& s) {
  int64_t n = 0;
  for (int32_t i = 0; i < s.n_seqs; i++) n += s.resp_lens[i];
  return n;
}

Tensor kl_estimate(const Tensor& logp, const Tensor& ref, int32_t estimator) {
  switch (estimator) {
    case UMAD_KL_K1: return logp - ref;
    case UMAD_KL_K2: return 0.5 * (logp - ref).pow(2);
    case UMAD_KL_K3: {
      // low_var_kl: exp(ref - logp) - (ref - logp) - 1, with verl's clamps.
      auto d = (ref - logp).clamp(-20, 20);
      return (d.exp() - d - 1).clamp(-10, 10);
    }
  }
  throw ArgError("unknown KL estimator code " + std::to_string(estimator));
}

// Aggregates per-token values x under mask over sequences given by seg (token -> seq).
Tensor aggregate(const Tensor& x, const Tensor& mask, const Tensor& seg, int64_t n_seqs,
                 int32_t mode, double norm_length) {
  auto xm = x * mask;
  switch (mode) {
    case UMAD_AGG_TOKEN_MEAN: return xm.sum() / mask.sum().clamp_min(1e-8);
    case UMAD_AGG_SEQ_MEAN_TOKEN_SUM:
    case UMAD_AGG_SEQ_MEAN_TOKEN_MEAN: {
      auto seq_sum = torch::zeros({n_seqs}, x.options()).index_add(0, seg, xm);
      if (mode == UMAD_AGG_SEQ_MEAN_TOKEN_MEAN) {
        auto cnt = torch::zeros({n_seqs}, x.options()).index_add(0, seg, mask);
        seq_sum = seq_sum / cnt.clamp_min(1e-8);
      }
      return seq_sum.mean();
    }
    case UMAD_AGG_SEQ_MEAN_TOKEN_SUM_NORM: return xm.sum() / norm_length;
  }
  throw ArgError("unknown loss aggregation mode " + std::to_string(mode));
}

Tensor from_floats(const float* p, int64_t n, const Tensor& like) {
  return torch::from_blob(const_cast<float*>(p), {n}, torch::kFloat32).to(like.options());
}

void copy_out(const Tensor& t, float* dst) {
  if (dst == nullptr) return;
  auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::memcpy(dst, c.data_ptr<float>(), sizeof(float) * c.numel());
}

}  // namespace

UMAD_EXPORT int umad_logprobs(umad_model* mp, const umad_seqs* seqs, double temperature,
                              int64_t logit_chunk, int32_t base_only, float* logp, float* entropy,
                              char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    CallTrace trace("logprobs");
    auto m = ready(mp);
    if (!seqs) throw ArgError("NULL batch");
    torch::NoGradGuard no_grad;
    InUse rest(*m, kRest);
    auto [lp, ent] = m->logprobs(*seqs, temperature, logit_chunk, base_only != 0);
    copy_out(lp, logp);
    copy_out(ent, entropy);
  });
}

UMAD_EXPORT int umad_policy_loss(umad_model* mp, const umad_seqs* seqs,
                                 const umad_token_inputs* in, const umad_loss_config* cfg,
                                 int32_t backward, double scale, umad_loss_stats* stats,
                                 float* logp_out, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    CallTrace trace("policy_loss");
    auto m = ready(mp);
    if (!seqs || !in || !cfg || !stats) throw ArgError("policy_loss: NULL argument");
    if (!in->old_logp || !in->advantage) throw ArgError("policy_loss needs old_logp and advantage");
    if (cfg->kl_coef != 0 && !in->ref_logp) throw ArgError("kl_coef is set but ref_logp is missing");
    if (backward && !m->cfg.trainable) throw ArgError("backward on a frozen model");
    auto policy_loss = umad::find_policy_loss(cfg->policy.name);
    torch::AutoGradMode grad_mode(backward != 0);
    InUse rest(*m, kRest);  // whole until the pass's last sums
    auto [logp, ent] = m->logprobs(*seqs, cfg->temperature, cfg->logit_chunk);
    const int64_t n = logp.size(0);
    if (n != response_tokens(*seqs)) throw ArgError("internal: response token count mismatch");
    std::vector<int64_t> seg_v;
    int64_t longest = 0;
    for (int32_t i = 0; i < seqs->n_seqs; i++) {
      for (int32_t r = 0; r < seqs->resp_lens[i]; r++) seg_v.push_back(i);
      longest = std::max<int64_t>(longest, seqs->resp_lens[i]);
    }
    auto seg = torch::tensor(seg_v, torch::kInt64).to(logp.device());
    auto old_lp = from_floats(in->old_logp, n, logp);
    auto adv = from_floats(in->advantage, n, logp);
    auto mask = in->mask ? from_floats(in->mask, n, logp) : torch::ones_like(logp);
    double norm = cfg->norm_length > 0 ? cfg->norm_length : double(std::max<int64_t>(longest, 1));
    auto agg = [&](const Tensor& x) {
      return aggregate(x, mask, seg, seqs->n_seqs, cfg->agg_mode, norm);
    };
    auto masked_mean = [&](const Tensor& x) { return umad::masked_mean(x, mask); };

    auto log_ratio = (logp - old_lp).clamp(-20, 20);
    auto terms = policy_loss(cfg->policy, {logp, log_ratio, adv, mask, seg, seqs->n_seqs});
    auto pg = terms.per_token;
    if (in->is_weight) pg = pg * from_floats(in->is_weight, n, logp);
    auto pg_loss = agg(pg);
    auto loss = pg_loss;
    if (cfg->entropy_coef != 0) loss = loss - cfg->entropy_coef * agg(ent);
    Tensor kl_mean = torch::zeros({}, logp.options());
    if (in->ref_logp) {
      auto kld = kl_estimate(logp, from_floats(in->ref_logp, n, logp), cfg->kl_estimator);
      kl_mean = masked_mean(kld.detach());
      if (cfg->kl_coef != 0) loss = loss + cfg->kl_coef * agg(kld);
    }
    if (backward) {
      (loss * scale).backward();
      pass_grads_done(*m, false);
    }
    // Every statistic crosses to the host in one transfer (one sync on a GPU).
    auto st = torch::stack({loss.detach(), pg_loss.detach(), kl_mean, masked_mean(ent.detach()),
                            terms.clipfrac.detach(), terms.clipfrac_lower.detach(),
                            masked_mean(-log_ratio.detach()), mask.sum()})
                  .to(torch::kCPU, torch::kDouble);
    auto v = st.accessor<double, 1>();
    stats->loss = v[0];
    stats->pg_loss = v[1];
    stats->kl = v[2];
    stats->entropy = v[3];
    stats->clipfrac = v[4];
    stats->clipfrac_lower = v[5];
    stats->ppo_kl = v[6];
    stats->tokens = int64_t(v[7]);
    copy_out(logp, logp_out);
  });
}

UMAD_EXPORT int umad_sft_loss(umad_model* mp, const umad_seqs* seqs, int64_t logit_chunk,
                              int32_t backward, double scale, double* loss, char* err,
                              size_t errlen) {
  return guarded(err, errlen, [&] {
    CallTrace trace("sft_loss");
    auto m = ready(mp);
    if (!seqs || !loss) throw ArgError("sft_loss: NULL argument");
    if (backward && !m->cfg.trainable) throw ArgError("backward on a frozen model");
    torch::AutoGradMode grad_mode(backward != 0);
    InUse rest(*m, kRest);
    auto lp = m->logprobs(*seqs, 1.0, logit_chunk).first;
    if (lp.numel() == 0) throw ArgError("sft_loss: batch has no response tokens");
    auto l = -lp.mean();
    if (backward) {
      (l * scale).backward();
      pass_grads_done(*m, false);
    }
    *loss = l.item<double>();
  });
}

UMAD_EXPORT int umad_kl(const float* logp, const float* ref_logp, int64_t n, int32_t estimator,
                        float* out, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    if (n < 0 || (n > 0 && (!logp || !ref_logp || !out))) throw ArgError("kl: NULL buffer");
    if (n == 0) return;
    auto like = torch::empty({0}, torch::kFloat64);
    copy_out(kl_estimate(from_floats(logp, n, like), from_floats(ref_logp, n, like), estimator), out);
  });
}
