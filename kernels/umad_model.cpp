// The model's construction and its tensors: the checkpoint's names and shapes, the LoRA
// adapters, the RoPE tables, the optimizer's moments and their parts under ZeRO, a tensor
// by name and kind; and the devices a model may live on.

#include "umad_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace umad {

torch::Dtype to_dtype(int32_t d) {
  switch (d) {
    case UMAD_F32: return torch::kFloat32;
    case UMAD_F64: return torch::kFloat64;
    case UMAD_BF16: return torch::kBFloat16;
    case UMAD_F16: return torch::kFloat16;
  }
  throw ArgError("unknown dtype code " + std::to_string(d));
}

int cuda_devices() {
  int n = int(torch::cuda::device_count());
#ifdef UMAD_TORCH_CUDA
  return n;
#else
  return n > 0 ? n : -1;
#endif
}

bool cuda_used = false;

torch::Device device_of(int32_t device, int32_t index) {
  if (device == UMAD_CPU) {
    if (index != 0) throw ArgError("the CPU device has no index (got " + std::to_string(index) + ")");
    return torch::kCPU;
  }
  if (device != UMAD_CUDA) throw ArgError("unknown device code " + std::to_string(device));
  const std::string name = "cuda:" + std::to_string(index);
  const int n = cuda_devices();
  if (n < 0)
    throw ArgError(name + " requested, but the torch plugin was built against libtorch " TORCH_VERSION
                   " without CUDA: build it against a CUDA PyTorch (see kernels/README.md)");
  if (n == 0)
    throw ArgError(name + " requested, but libtorch sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  if (index < 0 || index >= n)
    throw ArgError(name + " requested, but libtorch sees " + std::to_string(n) + " GPU(s): cuda:0 to cuda:" +
                   std::to_string(n - 1));
  return torch::Device(torch::kCUDA, c10::DeviceIndex(index));
}

Model::Model(const umad_model_config& c) : cfg(c) {
  if (c.activation != UMAD_ACT_SILU && c.activation != UMAD_ACT_GELU_TANH)
    throw ArgError("unknown activation code " + std::to_string(c.activation) + " (UMAD_ACT_SILU or UMAD_ACT_GELU_TANH)");
  if (!std::isfinite(c.norm_offset)) throw ArgError("the norms' weight offset must be finite");
  if (c.sliding_window_pattern < 0 ||
      (c.sliding_window_pattern > 0 && (c.sliding_window <= 0 || !(c.rope_local_theta > 0))))
    throw ArgError("a sliding-window pattern needs a positive sliding window and local rope base");
  if (!(c.query_pre_attn_scalar >= 0) || !std::isfinite(c.query_pre_attn_scalar))
    throw ArgError("query_pre_attn_scalar must be positive and finite, or 0 for head_dim");
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 ||
      c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
      c.head_dim % 2 != 0)
    throw ArgError("model config has a non-positive size or an odd head_dim");
  if (c.num_heads % c.num_kv_heads != 0)
    throw ArgError("num_heads " + std::to_string(c.num_heads) +
                   " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
  if (c.dtype != UMAD_F32 && c.dtype != UMAD_F64)
    throw ArgError("parameter dtype must be f32 or f64");
  if (c.compute_dtype != c.dtype && !(c.compute_dtype == UMAD_BF16 && c.dtype == UMAD_F32))
    throw ArgError("compute dtype must be the parameter dtype, or bf16 over f32 parameters");
  param_dtype = to_dtype(c.dtype);
  compute_dtype = to_dtype(c.compute_dtype);
  check_lora(c);
  if (c.shard_world > 1 && (c.shard_rank < 0 || c.shard_rank >= c.shard_world))
    throw ArgError("shard rank " + std::to_string(c.shard_rank) + " outside " + std::to_string(c.shard_world) + " ranks");
  device = device_of(c.device, c.device_index);
  if (device.is_cuda()) cuda_used = true;
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t qd = c.num_heads * hd, kvd = c.num_kv_heads * hd;
  expect("model.embed_tokens.weight", {c.vocab_size, H});
  for (int64_t i = 0; i < c.num_layers; i++) {
    auto p = "model.layers." + std::to_string(i) + ".";
    expect(p + "input_layernorm.weight", {H});
    expect(p + "self_attn.q_proj.weight", {qd, H});
    if (c.attention_bias) expect(p + "self_attn.q_proj.bias", {qd});
    expect(p + "self_attn.k_proj.weight", {kvd, H});
    if (c.attention_bias) expect(p + "self_attn.k_proj.bias", {kvd});
    expect(p + "self_attn.v_proj.weight", {kvd, H});
    if (c.attention_bias) expect(p + "self_attn.v_proj.bias", {kvd});
    expect(p + "self_attn.o_proj.weight", {H, qd});
    if (c.qk_norm) {
      expect(p + "self_attn.q_norm.weight", {hd});
      expect(p + "self_attn.k_norm.weight", {hd});
    }
    expect(p + "post_attention_layernorm.weight", {H});
    if (c.sandwich_norm) expect(p + "pre_feedforward_layernorm.weight", {H});
    expect(p + "mlp.gate_proj.weight", {I, H});
    expect(p + "mlp.up_proj.weight", {I, H});
    expect(p + "mlp.down_proj.weight", {H, I});
    if (c.sandwich_norm) expect(p + "post_feedforward_layernorm.weight", {H});
  }
  expect("model.norm.weight", {H});
  if (!c.tie_embeddings) expect("lm_head.weight", {c.vocab_size, H});
  // The frozen base of a LoRA model may live in bf16, and does under bf16 compute, as does
  // a frozen model; adapters are in the parameter dtype.
  const bool bf16 = compute_dtype == torch::kBFloat16;
  const bool frozen_base = c.lora_rank > 0 || !c.trainable;
  auto base_dt = (c.lora_rank > 0 && c.base_bf16) || (bf16 && frozen_base) ? torch::kBFloat16 : param_dtype;
  for (auto& n : names)
    params[n] = torch::zeros(shapes[n], torch::dtype(base_dt).device(device));
  if (c.lora_rank > 0) add_adapters();
  bind();
  init_rope();
}

void Model::check_lora(const umad_model_config& c) {
  if (c.lora_rank == 0) return;
  if (c.lora_rank < 0 || c.lora_rank > c.hidden_size)
    throw ArgError("LoRA rank " + std::to_string(c.lora_rank) + " is outside 1.." +
                   std::to_string(c.hidden_size) + " (the hidden size)");
  if (c.lora_targets <= 0 || c.lora_targets >= (1 << kTargets))
    throw ArgError("LoRA targets " + std::to_string(c.lora_targets) +
                   " must be a non-empty set of the 7 projections");
  if (!(c.lora_alpha > 0) || !std::isfinite(c.lora_alpha))
    throw ArgError("LoRA alpha must be positive and finite");
  if (!(c.lora_dropout >= 0 && c.lora_dropout < 1))
    throw ArgError("LoRA dropout must be in [0, 1)");
}

void Model::add_adapters() {
  const auto& c = cfg;
  const int64_t r = c.lora_rank, H = c.hidden_size, I = c.intermediate_size;
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  const int64_t in[kTargets] = {H, H, H, qd, H, H, I};
  const int64_t out[kTargets] = {qd, kvd, kvd, H, I, I, H};
  lora_scale = c.lora_alpha / double(r);
  for (int64_t i = 0; i < c.num_layers; i++) {
    for (int t = 0; t < kTargets; t++) {
      if (!(c.lora_targets & (1 << t))) continue;
      auto p = "model.layers." + std::to_string(i) + "." + kTargetModule[t];
      auto a = p + ".lora_A.weight", b = p + ".lora_B.weight";
      expect(a, {r, in[t]});
      expect(b, {out[t], r});
      adapters.insert(a);
      adapters.insert(b);
      adapted[p + ".weight"] = {i, t};
      auto gen = at::detail::createCPUGenerator(mix(c.lora_seed, uint64_t(i * kTargets + t)));
      auto bound = 1.0 / std::sqrt(double(in[t]));
      params[a] = torch::empty({r, in[t]}, torch::dtype(param_dtype)).uniform_(-bound, bound, gen).to(device);
      params[b] = torch::zeros({out[t], r}, torch::dtype(param_dtype).device(device));
    }
  }
}

void Model::bind() {
  embed = params.at("model.embed_tokens.weight");
  final_norm = params.at("model.norm.weight");
  lm_head = cfg.tie_embeddings ? embed : params.at("lm_head.weight");
  layers.assign(cfg.num_layers, Layer{});
  auto get = [&](const std::string& n) {
    auto it = params.find(n);
    return it == params.end() ? Tensor() : it->second;
  };
  for (int64_t i = 0; i < cfg.num_layers; i++) {
    auto p = "model.layers." + std::to_string(i) + ".";
    auto& L = layers[i];
    L.ln1 = get(p + "input_layernorm.weight");
    L.q_w = get(p + "self_attn.q_proj.weight");
    L.q_b = get(p + "self_attn.q_proj.bias");
    L.k_w = get(p + "self_attn.k_proj.weight");
    L.k_b = get(p + "self_attn.k_proj.bias");
    L.v_w = get(p + "self_attn.v_proj.weight");
    L.v_b = get(p + "self_attn.v_proj.bias");
    L.o_w = get(p + "self_attn.o_proj.weight");
    L.q_norm = get(p + "self_attn.q_norm.weight");
    L.k_norm = get(p + "self_attn.k_norm.weight");
    L.ln2 = get(p + "post_attention_layernorm.weight");
    if (cfg.sandwich_norm) {  // post_attention_layernorm follows the attention, not the MLP's input
      L.post_attn = L.ln2;
      L.ln2 = get(p + "pre_feedforward_layernorm.weight");
      L.post_ffn = get(p + "post_feedforward_layernorm.weight");
    }
    L.gate = get(p + "mlp.gate_proj.weight");
    L.up = get(p + "mlp.up_proj.weight");
    L.down = get(p + "mlp.down_proj.weight");
    for (int t = 0; t < kTargets; t++) {
      L.lora_a[t] = get(p + kTargetModule[t] + ".lora_A.weight");
      L.lora_b[t] = get(p + kTargetModule[t] + ".lora_B.weight");
    }
  }
}

void Model::init_rope() {
  auto dt = param_dtype == torch::kDouble ? torch::kDouble : torch::kFloat32;
  const int64_t hd = cfg.head_dim;
  auto exps = torch::arange(0, hd, 2, torch::kInt64).to(dt) / double(hd);
  inv_freq = 1.0 / torch::pow(cfg.rope_theta, exps);
  if (cfg.sliding_window_pattern > 0)
    inv_freq_local = (1.0 / torch::pow(cfg.rope_local_theta, exps)).to(device);
  if (cfg.rope_scaling_factor > 0) {
    const double factor = cfg.rope_scaling_factor, lo = cfg.rope_low_freq_factor,
                 hi = cfg.rope_high_freq_factor;
    const double old_ctx = double(cfg.rope_original_max_positions);
    if (hi <= lo || old_ctx <= 0) throw ArgError("llama3 rope_scaling needs high > low factors and original positions");
    const double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
    auto wavelen = 2 * M_PI / inv_freq;
    auto scaled = torch::where(wavelen > low_wavelen, inv_freq / factor, inv_freq);
    auto smooth = (old_ctx / wavelen - lo) / (hi - lo);
    auto smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
    inv_freq = torch::where(medium, smoothed, scaled);
  }
  inv_freq = inv_freq.to(device);
}

void Model::set_trainable() {
  for (auto& kv : params)
    if (!lora() || adapters.count(kv.first)) kv.second.requires_grad_(true);
  if (cfg.shard_world > 1) {
    for (auto& [n, part] : moment_parts(cfg.shard_rank, cfg.shard_world)) {
      exp_avg[n] = torch::zeros({part.second - part.first}, moment_options(params.at(n)));
      exp_avg_sq[n] = torch::zeros_like(exp_avg[n]);
      shard_off[n] = part.first;
    }
    shard_rank = cfg.shard_rank;
    shard_world = cfg.shard_world;
    return;
  }
  for (auto& kv : params) {
    if (!kv.second.requires_grad()) continue;
    exp_avg[kv.first] = torch::zeros(kv.second.sizes(), moment_options(kv.second));
    exp_avg_sq[kv.first] = torch::zeros_like(exp_avg[kv.first]);
  }
}

std::map<std::string, std::pair<int64_t, int64_t>> Model::moment_parts(int rank, int world) const {
  std::vector<std::string> trained;
  std::vector<int64_t> sizes;
  for (auto& n : names) {
    if (!params.at(n).requires_grad()) continue;
    trained.push_back(n);
    sizes.push_back(c10::multiply_integers(shapes.at(n)));
  }
  const auto b = umad::shard_bounds(sizes, world);
  const int64_t lo = b[size_t(rank)], hi = b[size_t(rank) + 1];
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (size_t i = 0; i < trained.size(); i++) {
    const int64_t a = std::max(lo, start) - start, e = std::min(hi, start + sizes[i]) - start;
    if (a < e) out[trained[i]] = {a, e};
    start += sizes[i];
  }
  return out;
}

Tensor& Model::lookup(const std::string& name, int32_t what) {
  auto it = params.find(name);
  if (it == params.end()) {
    if (cfg.tie_embeddings && name == "lm_head.weight")
      throw ArgError("lm_head.weight is tied to model.embed_tokens.weight in this model");
    throw ArgError("unknown tensor " + name);
  }
  switch (what) {
    case UMAD_WEIGHT: return it->second;
    case UMAD_GRAD: return it->second.mutable_grad();
    case UMAD_EXP_AVG:
    case UMAD_EXP_AVG_SQ: {
      if (shard_world > 1) {
        auto& g = what == UMAD_EXP_AVG ? gathered_avg : gathered_avg_sq;
        auto s = g.find(name);
        if (s != g.end()) return s->second;
        if (exp_avg.count(name) || it->second.requires_grad())
          throw ArgError("the optimizer state of " + name + " is sharded over " + std::to_string(shard_world) +
                         " ranks; gather it first");
      }
      auto& st = what == UMAD_EXP_AVG ? exp_avg : exp_avg_sq;
      auto s = st.find(name);
      if (s == st.end())
        throw ArgError("no optimizer state for " + name +
                       (lora() ? " (a LoRA model trains its adapters only)" : " (the model is not trainable)"));
      return s->second;
    }
  }
  throw ArgError("unknown tensor kind " + std::to_string(what));
}

Tensor Model::merged(const std::string& name) const {
  torch::NoGradGuard no_grad;
  auto w = params.at(name).detach().to(param_dtype);
  auto it = adapted.find(name);
  if (it == adapted.end()) return w;
  const auto& L = layers[it->second.first];
  int t = it->second.second;
  return w + torch::matmul(L.lora_b[t], L.lora_a[t]) * lora_scale;
}

Model* checked(umad_model* m) {
  if (m == nullptr) throw ArgError("NULL model");
  auto mm = reinterpret_cast<Model*>(m);
  return mm;
}

Model* ready(umad_model* m) {
  auto mm = checked(m);
  if (!mm->ready) throw ArgError("model is not finalized: set all tensors, then finalize");
  return mm;
}

bool released(const Model& m) { return m.w_comm && m.whole == 0; }

}  // namespace umad
