// The lm_head's log-probs and entropies over row chunks, as an autograd function: the
// heaviest op of a training pass at a real vocabulary (151,936 columns).

#include "umad_internal.h"

#include <torch/torch.h>

#include <algorithm>

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Log-probs and entropies of targets under softmax(h w^T * inv_temp), computed over row
// chunks so neither direction holds more than chunk x V logits at a time. With `keep`, a
// training pass keeps its chunks' log-softmax for the backward, which then skips the
// lm_head GEMM it would otherwise repeat; without, the backward recomputes each chunk.
struct ChunkedLogProbs : public torch::autograd::Function<ChunkedLogProbs> {
  static torch::Dtype math_dtype(const Tensor& h) {
    return h.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat32;
  }
  static variable_list forward(AutogradContext* ctx, Tensor h, Tensor w, Tensor targets,
                               double inv_temp, int64_t chunk, bool keep) {
    ctx->saved_data["inv_temp"] = inv_temp;
    ctx->saved_data["chunk"] = chunk;
    // An output the loss does not use (the entropy, mostly) arrives undefined in the
    // backward, not as zeros: its V-wide gradient terms are skipped, not computed as zero.
    ctx->set_materialize_grads(false);
    torch::NoGradGuard no_grad;
    const int64_t n = h.size(0);
    auto dt = math_dtype(h);
    keep = keep && (h.requires_grad() || w.requires_grad());
    auto kept = keep ? torch::empty({n, w.size(0)}, h.options().dtype(dt)) : Tensor();
    ctx->save_for_backward({h, w, targets, kept});
    auto wc = w.to(h.scalar_type());  // a bf16-stored frozen lm_head, cast for this call only
    auto logp = torch::empty({n}, h.options().dtype(dt));
    auto ent = torch::empty({n}, h.options().dtype(dt));
    for (int64_t s = 0; s < n; s += chunk) {
      int64_t len = std::min(chunk, n - s);
      auto z = torch::matmul(h.narrow(0, s, len), wc.t()).to(dt).mul_(inv_temp);
      Tensor lsm;
      if (keep) {
        lsm = kept.narrow(0, s, len);
        at::_log_softmax_out(lsm, z, -1, false);
      } else {
        lsm = torch::log_softmax(z, -1);
      }
      logp.narrow(0, s, len).copy_(lsm.gather(1, targets.narrow(0, s, len).unsqueeze(1)).squeeze(1));
      auto ent_c = ent.narrow(0, s, len);
      torch::sum_out(ent_c, lsm.exp().mul_(lsm), {-1}).neg_();
    }
    return {logp, ent};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto saved = ctx->get_saved_variables();
    auto h = saved[0], w = saved[1], targets = saved[2], kept = saved[3];
    double inv_temp = ctx->saved_data["inv_temp"].toDouble();
    int64_t chunk = ctx->saved_data["chunk"].toInt();
    const bool want_logp = g[0].defined(), want_ent = g[1].defined();
    const int64_t n = h.size(0);
    auto dt = math_dtype(h);
    const bool want_w = ctx->needs_input_grad(1);  // a frozen lm_head needs no [V, H] gradient
    if (!want_logp && !want_ent)
      return {torch::zeros_like(h), want_w ? torch::zeros_like(w) : Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    // d logp_t / dz = onehot(t) - p;  d H / dz = -p (log p + H); z = inv_temp * h w^T. The
    // per-row upstream gradients carry inv_temp, so the V-wide terms need no extra pass.
    auto g_logp = want_logp ? g[0].to(dt) * inv_temp : Tensor();
    auto g_ent = want_ent ? g[1].to(dt) * inv_temp : Tensor();
    auto wc = w.to(h.scalar_type());
    auto grad_h = torch::empty_like(h);
    Tensor grad_w;
    for (int64_t s = 0; s < n; s += chunk) {
      int64_t len = std::min(chunk, n - s);
      auto hc = h.narrow(0, s, len);
      auto lsm = kept.defined() ? kept.narrow(0, s, len)
                                : torch::log_softmax(torch::matmul(hc, wc.t()).to(dt).mul_(inv_temp), -1);
      auto p = lsm.exp();
      Tensor gz;
      if (want_ent) {
        // -g_ent p (lsm + H), with H = -sum(p lsm); a recomputed lsm becomes the gradient
        // in place, a kept one stays as saved.
        auto ge = g_ent.narrow(0, s, len).unsqueeze(1);
        auto H = (p * lsm).sum(-1, true).neg_();
        gz = (kept.defined() ? lsm + H : lsm.add_(H)).mul_(p).mul_(-ge);
        if (want_logp) gz.addcmul_(p, g_logp.narrow(0, s, len).unsqueeze(1), -1);
      } else {
        gz = p.mul_(-g_logp.narrow(0, s, len).unsqueeze(1));
      }
      if (want_logp) gz.scatter_add_(1, targets.narrow(0, s, len).unsqueeze(1), g_logp.narrow(0, s, len).unsqueeze(1));
      auto grad_hc = grad_h.narrow(0, s, len);
      torch::mm_out(grad_hc, gz.to(wc.scalar_type()), wc);
      if (!want_w) continue;
      if (grad_w.defined())
        grad_w.addmm_(gz.t(), hc.to(dt));
      else
        grad_w = torch::mm(gz.t(), hc.to(dt));
    }
    if (want_w && !grad_w.defined()) grad_w = torch::zeros(w.sizes(), w.options().dtype(dt));
    return {grad_h, want_w ? grad_w.to(w.scalar_type()) : Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

namespace umad {

std::vector<Tensor> chunked_logprobs(const Tensor& h, const Tensor& w, const Tensor& targets, double inv_temp,
                                     int64_t chunk, bool keep) {
  return ChunkedLogProbs::apply(h, w, targets, inv_temp, chunk, keep);
}

}  // namespace umad
