// AdamW's arithmetic: the overflow-safe gradient norm and one parameter's update.

#include "umad_internal.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

using torch::Tensor;

namespace umad {

// A gradient's sum of squares in float64 without a float64 copy of it (which cost 0.9 s per
// step at the 0.5B shape): float norms of 1,024-element blocks, exact to float rounding at
// that length, squared and summed in float64, so a large model's total cannot overflow.
Tensor sum_of_squares(const Tensor& g) {
  auto f = g.reshape({-1});
  const int64_t n = f.numel(), block = kNormBlock, full = n / block * block;
  auto sq = torch::zeros({}, f.options().dtype(torch::kDouble));
  if (full > 0) sq += f.narrow(0, 0, full).view({-1, block}).norm(2, {1}).to(torch::kDouble).pow(2).sum();
  if (full < n) sq += f.narrow(0, full, n - full).norm().to(torch::kDouble).pow(2);
  return sq;
}

void adamw_update(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const umad_adamw& opt, double coef, double bc1, double bc2) {
  // The update is elementwise: on the CPU it runs in slices of 256K values, so each slice's
  // passes stay in cache and its temporary comes back from malloc's heap instead of a
  // parameter-sized buffer mapped and page-faulted in every step (2 GB per step at the 0.5B
  // shape). The same ops in the same order: bit-identical to the whole tensor.
  const int64_t n = p.numel(), slice = p.is_cuda() ? n : kAdamSlice;
  auto pf = p.view({-1}), gf = g.view({-1}), ef = exp_avg.view({-1}), sf = exp_avg_sq.view({-1});
  for (int64_t s = 0; s < n; s += slice) {
    const int64_t len = std::min(slice, n - s);
    auto ps = pf.narrow(0, s, len), gs = gf.narrow(0, s, len);
    auto ea = ef.narrow(0, s, len), eas = sf.narrow(0, s, len);
    if (coef < 1.0) gs.mul_(coef);  // the gradient is dropped after the step
    ps.mul_(1 - opt.lr * opt.weight_decay);
    ea.mul_(opt.beta1).add_(gs, 1 - opt.beta1);
    eas.mul_(opt.beta2).addcmul_(gs, gs, 1 - opt.beta2);
    auto denom = eas.sqrt().div_(std::sqrt(bc2)).add_(opt.eps);
    ps.addcdiv_(ea, denom, -opt.lr / bc1);
  }
}

void adamw_offloaded(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                     const umad_adamw& opt, double coef, double bc1, double bc2) {
  // Copies even where the moments' device is the weights' (the CPU): the same path as from a
  // GPU, which the tests can then check.
  const auto host = exp_avg.device();
  const int64_t n = p.numel();
  auto pf = p.view({-1}), gf = g.view({-1}), ef = exp_avg.view({-1}), sf = exp_avg_sq.view({-1});
  for (int64_t s = 0; s < n; s += kOffloadChunk) {
    const int64_t len = std::min(kOffloadChunk, n - s);
    auto ps = pf.narrow(0, s, len);
    auto w = ps.to(host, ps.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    auto gs = gf.narrow(0, s, len).to(host, gf.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    adamw_update(w, gs, ef.narrow(0, s, len), sf.narrow(0, s, len), opt, coef, bc1, bc2);
    ps.copy_(w);
  }
}

std::vector<int64_t> shard_bounds(const std::vector<int64_t>& sizes, int world) {
  int64_t total = 0;
  for (auto n : sizes) total += n;
  std::vector<int64_t> out{0};
  int64_t start = 0;  // of tensor i
  size_t i = 0;
  for (int r = 1; r < world; r++) {
    const int64_t target = total / world * r + total % world * r / world;  // total * r / world
    while (i < sizes.size() && start + sizes[i] < target) start += sizes[i++];
    int64_t edge = total;
    if (i < sizes.size())  // the first cut at or after target inside tensor i
      edge = start + std::min(sizes[i], (target - start + kAdamSlice - 1) / kAdamSlice * kAdamSlice);
    out.push_back(std::max(edge, out.back()));
  }
  out.push_back(total);
  return out;
}

}  // namespace umad
