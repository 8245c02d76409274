// The C ABI's optimizer step: the gradient norm (summed over the ranks' parts under ZeRO
// stage 2), clipping, AdamW on every trained tensor (umad_optim.cpp's arithmetic), and the
// step counters a checkpoint keeps.

#include "umad_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace umad;

namespace {

// sharded_sum_of_squares is the squared norm of a stage 2 model's summed gradients, the
// float64 sum one process computes (umad::sum_of_squares of each tensor, added in params'
// order): each rank squares the 1,024-element blocks of its parts, and a tensor's blocks,
// gathered from the ranks that hold them, are summed as the one vector they are. The cuts
// between parts fall on multiples of kAdamSlice, so on block edges. summed gets the names
// some rank had a gradient for; the others, as without sharding, are not updated.
Tensor sharded_sum_of_squares(Model& m, std::set<std::string>& summed) {
  constexpr int64_t block = umad::kNormBlock;
  std::vector<std::string> trained;
  std::vector<int64_t> sizes;
  for (auto& n : m.names) {
    if (!m.params.at(n).requires_grad()) continue;
    trained.push_back(n);
    sizes.push_back(c10::multiply_integers(m.shapes.at(n)));  // a stage 3 parameter is released now
  }
  auto flags = torch::zeros({int64_t(trained.size())}, torch::kFloat32);
  for (size_t i = 0; i < trained.size(); i++)
    if (m.grad_seen.count(trained[i])) flags[int64_t(i)] = 1;
  m.grad_comm->max(flags);
  flags = flags.to(torch::kCPU);
  auto any = [&](size_t i) { return flags[int64_t(i)].item<float>() != 0; };
  auto f64 = torch::dtype(torch::kDouble).device(m.device);
  std::vector<Tensor> mine;
  for (size_t i = 0; i < trained.size(); i++) {
    auto gp = m.grad_part.find(trained[i]);
    if (!any(i) || gp == m.grad_part.end()) continue;
    const auto& g = gp->second;
    const int64_t n = g.numel(), full = n / block * block;
    if (full > 0) mine.push_back(g.narrow(0, 0, full).view({-1, block}).norm(2, {1}).to(torch::kDouble).pow(2));
    if (full < n) mine.push_back(g.narrow(0, full, n - full).norm().to(torch::kDouble).pow(2).reshape({1}));
  }
  auto all = m.grad_comm->gather(mine.empty() ? torch::zeros({0}, f64) : torch::cat(mine));
  const auto b = umad::shard_bounds(sizes, m.shard_world);
  std::vector<int64_t> read(all.size(), 0);
  std::map<std::string, Tensor> per;
  int64_t start = 0;
  for (size_t i = 0; i < trained.size(); i++) {
    const int64_t n = sizes[i];
    if (any(i)) {
      std::vector<Tensor> blocks;
      Tensor tail;
      for (size_t r = 0; r < all.size(); r++) {
        const int64_t lo = std::max(b[r], start), hi = std::min(b[r + 1], start + n);
        if (lo >= hi) continue;
        const int64_t len = hi - lo, whole = len / block;
        if (whole > 0) blocks.push_back(all[r].narrow(0, read[r], whole));
        read[r] += whole;
        if (len % block != 0) tail = all[r].narrow(0, read[r]++, 1).reshape({});
      }
      auto sq = torch::zeros({}, f64);
      if (!blocks.empty()) sq += torch::cat(blocks).sum();
      if (tail.defined()) sq += tail;
      per[trained[i]] = sq;
      summed.insert(trained[i]);
    }
    start += n;
  }
  auto sq = torch::zeros({}, f64);
  for (auto& kv : m.params) {
    auto it = per.find(kv.first);
    if (it != per.end()) sq += it->second;
  }
  return sq;
}

}  // namespace

UMAD_EXPORT int umad_optim_get(const umad_model* mp, int64_t* step, int64_t* skipped_total) {
  auto m = reinterpret_cast<const Model*>(mp);
  if (!m || !step || !skipped_total) return UMAD_ERR_ARG;
  *step = m->step;
  *skipped_total = m->skipped_total;
  return UMAD_OK;
}

UMAD_EXPORT int umad_optim_set(umad_model* mp, int64_t step, int64_t skipped_total) {
  auto m = reinterpret_cast<Model*>(mp);
  if (!m || step < 0 || skipped_total < 0) return UMAD_ERR_ARG;
  m->step = step;
  m->skipped_total = skipped_total;
  return UMAD_OK;
}

UMAD_EXPORT int umad_zero_grad(umad_model* mp) {
  auto m = reinterpret_cast<Model*>(mp);
  if (!m) return UMAD_ERR_ARG;
  for (auto& kv : m->params) kv.second.mutable_grad() = Tensor();
  m->grad_part.clear();
  m->grad_seen.clear();
  return UMAD_OK;
}

UMAD_EXPORT int umad_optim_step(umad_model* mp, const umad_adamw* opt, umad_step_stats* stats,
                                char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    CallTrace trace("optim_step");
    auto m = ready(mp);
    if (!opt || !stats) throw ArgError("optim_step: NULL argument");
    if (!m->cfg.trainable) throw ArgError("optimizer step on a frozen model");
    if (!(opt->lr >= 0) || opt->beta1 < 0 || opt->beta1 >= 1 || opt->beta2 < 0 || opt->beta2 >= 1 ||
        !(opt->eps > 0))
      throw ArgError("AdamW needs lr >= 0, betas in [0,1) and eps > 0");
    torch::NoGradGuard no_grad;
    if (m->w_comm && m->whole > 0) throw ArgError("optimizer step while the sharded weights are held whole");
    m->passes = 0;  // the next step's dropout masks start afresh
    // Summed on the device; one transfer.
    auto sq = torch::zeros({}, torch::dtype(torch::kDouble).device(m->device));
    std::set<std::string> summed;  // stage 2: what some rank had a gradient for
    if (m->grad_comm) {
      sq = sharded_sum_of_squares(*m, summed);
    } else {
      for (auto& kv : m->params) {
        if (!kv.second.requires_grad()) continue;  // frozen: never a gradient, never updated
        auto& g = kv.second.grad();
        if (g.defined()) sq += umad::sum_of_squares(g);
      }
    }
    double norm = std::sqrt(sq.item<double>());
    stats->grad_norm = norm;
    stats->skipped = 0;
    if (!std::isfinite(norm)) {
      m->skipped_total++;
      stats->skipped = 1;
      umad_zero_grad(mp);
      stats->step = m->step;
      stats->skipped_total = m->skipped_total;
      return;
    }
    double coef = 1.0;
    if (opt->max_grad_norm > 0) coef = std::min(1.0, opt->max_grad_norm / (norm + 1e-6));
    m->step++;
    // torch.optim.AdamW, decoupled weight decay, bias-corrected moments.
    const double bc1 = 1 - std::pow(opt->beta1, double(m->step));
    const double bc2 = 1 - std::pow(opt->beta2, double(m->step));
    for (auto& kv : m->params) {
      auto& p = kv.second;
      if (!p.requires_grad()) continue;
      auto g = p.grad();
      auto ea = m->exp_avg.find(kv.first);
      if (m->grad_comm) {  // stage 2: this rank's part of the summed gradient, if any rank had one
        auto gp = m->grad_part.find(kv.first);
        g = summed.count(kv.first) && gp != m->grad_part.end() ? gp->second : Tensor();
      }
      if (!g.defined() || ea == m->exp_avg.end()) continue;  // none: another rank's part
      auto w = p.detach();
      if (m->shard_world > 1) {  // this rank's part, starting at a slice of the whole update
        const int64_t off = m->shard_off.at(kv.first), n = ea->second.numel();
        w = m->w_comm ? m->w_part.at(kv.first) : w.view({-1}).narrow(0, off, n);  // stage 3: the masters
        if (!m->grad_comm) g = g.view({-1}).narrow(0, off, n);  // stage 2's is the part already
      }
      auto update = m->cfg.offload_optimizer ? umad::adamw_offloaded : umad::adamw_update;
      update(w, g, ea->second, m->exp_avg_sq.at(kv.first), *opt, coef, bc1, bc2);
    }
    umad_zero_grad(mp);
    stats->step = m->step;
    stats->skipped_total = m->skipped_total;
  });
}
