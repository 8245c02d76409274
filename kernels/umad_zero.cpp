// ZeRO on a model: stage 1's part of the AdamW moments, stage 2's gradient sums inside the
// backward, stage 3's weights gathered a layer at a time while a pass uses them, and the
// model's tensors as the collectives of umad_dist.cpp see them.

#include "umad_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace umad {

namespace {

// finish_sums completes the gradient sums reduce_grads started last.
void finish_sums(Model& m) {
  if (!m.pending_sums) return;
  auto f = std::move(m.pending_sums);
  m.pending_sums = nullptr;
  f();
}

// reduce_grads sums the gradients of the trained parameters names over the ranks (zeros
// where this rank has none), adds this rank's part of the sums to grad_part and drops the
// whole gradients: ZeRO stage 2's reduce-scatter, as an all-reduce and a slice. The sums
// run behind the backward of the next layer: the call completes the previous group's first,
// and pass_grads_done the last.
void reduce_grads(Model& m, const std::vector<std::string>& names) {
  finish_sums(m);
  if (names.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<Tensor> gs;
  for (auto& n : names) {
    auto& p = m.params.at(n);
    auto g = p.grad();
    if (g.defined())
      m.grad_seen.insert(n);
    else
      g = torch::zeros_like(p);
    gs.push_back(g.contiguous());
  }
  auto wait = m.grad_comm->sum(gs);
  m.pending_sums = [&m, names, gs, wait] {
    wait();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names.size(); i++) {
      auto& n = names[i];
      m.params.at(n).mutable_grad() = Tensor();
      auto ea = m.exp_avg.find(n);
      if (ea == m.exp_avg.end()) continue;  // another rank's part
      auto part = gs[i].view({-1}).narrow(0, m.shard_off.at(n), ea->second.numel());
      auto& acc = m.grad_part[n];
      acc = acc.defined() ? acc.add_(part) : part.clone();
    }
  };
}

// as_bytes is a contiguous tensor's storage as a flat byte vector.
Tensor as_bytes(const Tensor& t) { return t.view({-1}).view(torch::kUInt8); }

// gather_weights makes the parameters names (checkpoint order) whole again: every rank's
// part of them, all-gathered as bytes into new tensors, one range of consecutive
// parameters at a time (the embedding and the final norm are two).
void gather_weights(Model& m, const std::vector<std::string>& names) {
  torch::NoGradGuard no_grad;
  std::vector<Tensor> mine;
  for (auto& n : m.names) {
    auto it = m.w_part.find(n);
    if (it != m.w_part.end()) mine.push_back(as_bytes(it->second));
  }
  const int64_t es = int64_t(m.params.at(m.names.front()).element_size());
  std::vector<int64_t> bounds;
  for (auto b : m.w_bounds) bounds.push_back(b * es);
  size_t i = 0;
  while (i < names.size()) {
    std::vector<Tensor> dst;
    const int64_t lo = m.w_start.at(names[i]);
    int64_t hi = lo;
    for (; i < names.size() && m.w_start.at(names[i]) == hi; i++) {
      auto& p = m.params.at(names[i]);
      auto full = torch::empty(m.shapes.at(names[i]), torch::dtype(p.scalar_type()).device(p.device()));
      dst.push_back(as_bytes(full));
      hi += full.numel();
      p.set_data(full);
    }
    m.w_comm->gather_range(mine, dst, bounds, lo * es, hi * es);
  }
}

void release_weights(Model& m, const std::vector<std::string>& names) {
  for (auto& n : names) {
    auto& p = m.params.at(n);
    p.set_data(torch::empty({0}, torch::dtype(p.scalar_type()).device(p.device())));
  }
}

const std::vector<std::string>& weight_group(const Model& m, int64_t group) {
  return group == kRest ? m.w_rest : m.w_layers.at(size_t(group));
}

// layer_of is the layer a parameter belongs to (model.layers.N.*), or kRest.
int64_t layer_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  return name.rfind(prefix, 0) == 0 ? std::stoll(name.substr(prefix.size())) : kRest;
}

}  // namespace

InUse::InUse(const Model& cm, int64_t g) {
  auto& mm = const_cast<Model&>(cm);
  if (!mm.w_comm || mm.whole > 0) return;
  gather_weights(mm, weight_group(mm, g));
  m = &mm;
  group = g;
}

InUse::~InUse() {
  try {
    if (m) release_weights(*m, weight_group(*m, group));
  } catch (...) {  // a destructor must not throw; the next gather replaces the data anyway
  }
}

// A checkpointed layer's backward has completed its parameters' gradients of this pass.
void layer_grads_done(const Model& m, int64_t layer) {
  if (m.grad_comm) reduce_grads(const_cast<Model&>(m), m.layer_trained[size_t(layer)]);
}

// pass_grads_done sums what a training pass left unsummed: with checkpointing the
// embedding, final norm and head, else everything. A rank without data for a pass calls
// it alone, so that its collectives still meet the others' (umad::zero_pass).
void pass_grads_done(Model& m, bool no_data) {
  if (!m.grad_comm) return;
  if (m.cfg.grad_checkpoint) {
    if (no_data) {
      for (int64_t i = 0; i < m.cfg.num_layers; i++) InUse forward(m, i);  // stage 3's gathers
      for (int64_t i = m.cfg.num_layers - 1; i >= 0; i--) {
        InUse backward(m, i);
        reduce_grads(m, m.layer_trained[size_t(i)]);
      }
    }
    reduce_grads(m, m.rest_trained);
    finish_sums(m);
    return;
  }
  std::vector<std::string> all;
  for (auto& n : m.names)
    if (m.params.at(n).requires_grad()) all.push_back(n);
  reduce_grads(m, all);
  finish_sums(m);
}

std::vector<Tensor> parameters(umad_model* mp) {
  auto m = ready(mp);
  std::vector<Tensor> out;
  for (auto& n : m->names) out.push_back(m->params.at(n));
  return out;
}

std::vector<Tensor> optimizer_state(umad_model* mp) {
  auto m = ready(mp);
  if (m->shard_world > 1) throw ArgError("the optimizer state is sharded over ranks");
  std::vector<Tensor> out;
  for (auto& n : m->names) {
    auto it = m->exp_avg.find(n);  // none for a frozen model or a LoRA model's base
    if (it == m->exp_avg.end()) continue;
    out.push_back(it->second);
    out.push_back(m->exp_avg_sq.at(n));
  }
  return out;
}

std::vector<Tensor> trained(umad_model* mp) {
  auto m = ready(mp);
  if (released(*m)) throw ArgError("the weights are sharded over the ranks (ZeRO stage 3); gather them whole first");
  std::vector<Tensor> out;
  for (auto& n : m->names) {
    auto& p = m->params.at(n);
    if (p.requires_grad()) out.push_back(p.detach().view({-1}));
  }
  return out;
}

int shard_world(umad_model* mp) { return ready(mp)->shard_world; }

void shard_optimizer(umad_model* mp, int rank, int world) {
  auto m = ready(mp);
  if (!m->cfg.trainable) throw ArgError("a frozen model has no optimizer state to shard");
  if (world < 1 || rank < 0 || rank >= world) throw ArgError("shard rank outside the world");
  m->gathered_avg.clear();
  m->gathered_avg_sq.clear();
  if (m->shard_world == world && m->shard_rank == rank) return;
  if (m->shard_world != 1) throw ArgError("the optimizer state is sharded over another group");
  const auto parts = m->moment_parts(rank, world);
  for (auto& n : m->names) {
    if (!m->params.at(n).requires_grad()) continue;
    auto it = parts.find(n);
    if (it == parts.end()) {
      m->exp_avg.erase(n);
      m->exp_avg_sq.erase(n);
      continue;
    }
    // A copy of the part, so that the whole tensor is freed.
    const auto [a, e] = it->second;
    m->exp_avg[n] = m->exp_avg.at(n).reshape({-1}).narrow(0, a, e - a).clone();
    m->exp_avg_sq[n] = m->exp_avg_sq.at(n).reshape({-1}).narrow(0, a, e - a).clone();
    m->shard_off[n] = a;
  }
  m->shard_rank = rank;
  m->shard_world = world;
}

void shard_gradients(umad_model* mp, std::shared_ptr<GradComm> comm) {
  auto m = ready(mp);
  if (m->shard_world < 2) throw ArgError("the gradients are sharded with the optimizer state, which is not");
  m->layer_trained.assign(size_t(m->cfg.num_layers), {});
  m->rest_trained.clear();
  for (auto& n : m->names) {
    if (!m->params.at(n).requires_grad()) continue;
    const int64_t l = layer_of(n);
    (l == kRest ? m->rest_trained : m->layer_trained.at(size_t(l))).push_back(n);
  }
  umad_zero_grad(mp);
  m->grad_comm = std::move(comm);
}

void zero_pass(umad_model* mp) {
  auto m = ready(mp);
  if (!m->grad_comm) throw ArgError("the gradients are not sharded");
  InUse rest(*m, kRest);
  pass_grads_done(*m, true);
}

void empty_forward(umad_model* mp) {
  auto m = ready(mp);
  if (!m->w_comm) throw ArgError("the weights are not sharded");
  InUse rest(*m, kRest);
  for (int64_t i = 0; i < m->cfg.num_layers; i++) InUse use(*m, i);
}

void shard_weights(umad_model* mp, std::shared_ptr<GradComm> comm, int rank, int world) {
  auto m = ready(mp);
  if (m->w_comm) throw ArgError("the weights are sharded already");
  if (m->lora()) throw ArgError("a LoRA model's weights are not sharded (ZeRO stage 3 is for full fine-tuning)");
  if (m->cfg.trainable && (!m->grad_comm || m->shard_world != world))
    throw ArgError("stage 3 shards the weights of a model whose gradients are sharded over the same ranks");
  if (m->cfg.trainable && !m->cfg.grad_checkpoint)
    throw ArgError("sharded weights (ZeRO stage 3) train with gradient checkpointing only");
  torch::NoGradGuard no_grad;
  std::vector<int64_t> sizes;
  int64_t start = 0;
  m->w_layers.assign(size_t(m->cfg.num_layers), {});
  m->w_rest.clear();
  for (auto& n : m->names) {
    sizes.push_back(m->params.at(n).numel());
    m->w_start[n] = start;
    start += sizes.back();
    const int64_t l = layer_of(n);
    (l == kRest ? m->w_rest : m->w_layers.at(size_t(l))).push_back(n);
  }
  m->w_bounds = shard_bounds(sizes, world);
  const int64_t lo = m->w_bounds[size_t(rank)], hi = m->w_bounds[size_t(rank) + 1];
  for (auto& n : m->names) {
    auto& p = m->params.at(n);
    const int64_t a = std::max(lo, m->w_start[n]) - m->w_start[n], e = std::min(hi, m->w_start[n] + p.numel()) - m->w_start[n];
    if (a < e) m->w_part[n] = p.detach().view({-1}).narrow(0, a, e - a).clone();
  }
  if (m->cfg.trainable)  // the moments' parts must be the weights' (every parameter trained)
    for (auto& kv : m->w_part)
      if (!m->exp_avg.count(kv.first) || m->exp_avg.at(kv.first).numel() != kv.second.numel())
        throw ArgError("internal: the weights' parts are not the optimizer state's");
  m->w_comm = std::move(comm);
  for (auto& n : m->names) release_weights(*m, {n});
}

void hold_weights(umad_model* mp) {
  auto m = ready(mp);
  if (!m->w_comm) return;
  if (m->whole == 0) gather_weights(*m, m->names);
  m->whole++;
}

void release_held_weights(umad_model* mp) {
  auto m = ready(mp);
  if (!m->w_comm || m->whole == 0) return;
  if (--m->whole == 0) release_weights(*m, m->names);
}

std::vector<Tensor> shard_moments(umad_model* mp, int32_t what) {
  auto m = ready(mp);
  auto& st = what == UMAD_EXP_AVG ? m->exp_avg : m->exp_avg_sq;
  std::vector<Tensor> out;
  for (auto& n : m->names) {
    auto it = st.find(n);
    if (it != st.end()) out.push_back(it->second.view({-1}));
  }
  return out;
}

void set_gathered(umad_model* mp, const std::vector<Tensor>& avg, const std::vector<Tensor>& avg_sq) {
  auto m = ready(mp);
  size_t i = 0;
  for (auto& n : m->names) {
    auto& p = m->params.at(n);
    if (!p.requires_grad()) continue;
    if (i >= avg.size() || i >= avg_sq.size()) throw ArgError("gathered moments: too few tensors");
    m->gathered_avg[n] = avg[i].view(p.sizes());
    m->gathered_avg_sq[n] = avg_sq[i].view(p.sizes());
    i++;
  }
}

}  // namespace umad
