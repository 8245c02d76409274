// libumad_torch: decoder-only transformers (Qwen2/Qwen2.5, Qwen3, Llama 3) with Hugging
// Face semantics, the policy and SFT losses and the optimizer step behind the C ABI of
// umad_torch.h. The lm_head's chunked log-probs (umad_logprobs.cpp), the table of policy
// losses (umad_losses.cpp), AdamW's arithmetic (umad_optim.cpp), the collectives
// (umad_dist.cpp) and the CPU allocator (umad_alloc.cpp) are translation units of their
// own: compiles against torch are slow, and a change to one of them does not recompile the
// model.

#include "umad_compat.h"
#include "umad_internal.h"
#include "umad_torch.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>
// UMAD_TORCH_CUDA: built against a CUDA libtorch (CMakeLists.txt defines it when the Torch
// libraries include c10_cuda). Only releasing the cache needs it; the device code is generic.
#ifdef UMAD_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>  // CUDART_VERSION
#endif

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#define UMAD_EXPORT extern "C" __attribute__((visibility("default")))

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

using umad::ArgError;

void set_err(char* err, size_t errlen, const char* msg) {
  if (err == nullptr || errlen == 0) return;
  std::snprintf(err, errlen, "%s", msg);
}

// guarded runs f and turns every exception into a code and a message.
template <typename F>
int guarded(char* err, size_t errlen, F&& f) {
  try {
    f();
    return UMAD_OK;
  } catch (const ArgError& e) {
    set_err(err, errlen, e.what());
    return UMAD_ERR_ARG;
  } catch (const c10::Error& e) {
    set_err(err, errlen, e.what_without_backtrace());
    return UMAD_ERR_TORCH;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return UMAD_ERR_TORCH;
  } catch (...) {
    set_err(err, errlen, "unknown C++ exception");
    return UMAD_ERR_TORCH;
  }
}

std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); i++) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

torch::Dtype to_dtype(int32_t d) {
  switch (d) {
    case UMAD_F32: return torch::kFloat32;
    case UMAD_F64: return torch::kFloat64;
    case UMAD_BF16: return torch::kBFloat16;
    case UMAD_F16: return torch::kFloat16;
  }
  throw ArgError("unknown dtype code " + std::to_string(d));
}

// GPUs libtorch sees, -1 when this plugin's libtorch has no CUDA at all (Debian's CPU build).
int cuda_devices() {
  int n = int(torch::cuda::device_count());
#ifdef UMAD_TORCH_CUDA
  return n;
#else
  return n > 0 ? n : -1;
#endif
}

bool cuda_used = false;  // a model was placed on a GPU: there is a cache to release

// device_of is where a model asked for (device, index) lives, or one line saying why not.
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

// Causal attention of one sequence. q: [nh, L, hd]; k, v: [nkv, L, hd].
// The positions a query may not see: later ones, and with a window those window or more
// behind it. [L, L] bool.
Tensor hidden_mask(int64_t L, int64_t window, torch::Device dev) {
  auto ones = torch::ones({L, L}, torch::dtype(torch::kBool).device(dev));
  auto mask = ones.triu(1);
  if (window > 0) mask = mask.logical_or(ones.tril(-window));
  return mask;
}

// Sliding-window attention (Gemma 3's local layers): explicit masks, only where the window
// is shorter than the sequence.
Tensor window_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  const int64_t nh = q.size(0), L = q.size(1), hd = q.size(2), nkv = k.size(0);
  auto mask = hidden_mask(L, window, q.device());
  auto qg = q.view({nkv, nh / nkv, L, hd});
  auto scores = torch::matmul(qg, k.unsqueeze(1).transpose(-1, -2)) / std::sqrt(double(hd));
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  auto probs = torch::softmax(scores, -1, scores.scalar_type() == torch::kDouble
                                              ? torch::kDouble
                                              : torch::kFloat32)
                   .to(v.scalar_type());
  return torch::matmul(probs, v.unsqueeze(1)).view({nh, L, hd});
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window = 0) {
  const int64_t nh = q.size(0), L = q.size(1), hd = q.size(2), nkv = k.size(0);
  if (window > 0 && L > window) return window_attention(q, k, v, window);
#if UMAD_HAS_SDPA_GQA
  // Fused: never materialises the [nh, L, L] scores, and reads each kv head for its group.
  (void)L, (void)hd;
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                          /*enable_gqa=*/nkv != nh);
#elif UMAD_HAS_SDPA
  // Before 2.5 SDPA wants one kv head per query head: a batch of kv groups, each kv head a
  // broadcast (stride-0) view over its group's query heads.
  const int64_t g = nh / nkv;
  auto group = [&](const Tensor& t) { return t.unsqueeze(1).expand({nkv, g, L, hd}); };
  return at::scaled_dot_product_attention(q.view({nkv, g, L, hd}), group(k), group(v), {}, 0.0, /*is_causal=*/true)
      .view({nh, L, hd});
#else
  // Grouped-query attention without copying k/v: head h uses kv head h / (nh/nkv).
  auto qg = q.view({nkv, nh / nkv, L, hd});
  auto scores = torch::matmul(qg, k.unsqueeze(1).transpose(-1, -2)) / std::sqrt(double(hd));
  auto mask = torch::ones({L, L}, torch::dtype(torch::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  auto probs = torch::softmax(scores, -1, scores.scalar_type() == torch::kDouble
                                              ? torch::kDouble
                                              : torch::kFloat32)
                   .to(v.scalar_type());
  return torch::matmul(probs, v.unsqueeze(1)).view({nh, L, hd});
#endif
}

// splitmix64: derives independent seeds (adapter inits, dropout masks) from one.
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A packed micro-batch: all sequences in one row, positions restarting per sequence.
struct Batch {
  Tensor tokens;                 // [T] int64
  std::vector<int64_t> lens;     // per-sequence total length
  Tensor cos, sin;               // [T, 1, hd] in compute dtype
  Tensor cos_local, sin_local;   // the same at the sliding-window layers' base (Gemma 3)
  bool adapters = false;         // apply the LoRA adapters
  double drop_p = 0;             // LoRA dropout of this pass (0 outside training passes)
  int64_t drop_seed = 0;         // seeds this pass's dropout masks
};

// LoRA targets in bit order of UMAD_LORA_*, as HF module paths under a layer.
constexpr int kTargets = 7;
const char* const kTargetModule[kTargets] = {"self_attn.q_proj", "self_attn.k_proj",
                                             "self_attn.v_proj", "self_attn.o_proj",
                                             "mlp.gate_proj",    "mlp.up_proj",
                                             "mlp.down_proj"};
enum { T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN };

struct Layer {
  Tensor ln1, q_w, q_b, k_w, k_b, v_w, v_b, o_w, q_norm, k_norm, ln2, gate, up, down;
  Tensor post_attn, post_ffn;  // Gemma 3's sandwich norms after attention and MLP
  Tensor lora_a[kTargets], lora_b[kTargets];  // undefined where a target has no adapter
};

// A frozen weight stored in another dtype than the compute (bf16 base of a LoRA model):
// the backward keeps the stored weight and casts it again, never a compute-dtype copy.
struct CastLinear : public torch::autograd::Function<CastLinear> {
  static Tensor forward(AutogradContext* ctx, Tensor x, Tensor w) {
    ctx->save_for_backward({w});
    return torch::linear(x, w.to(x.scalar_type()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto w = ctx->get_saved_variables()[0];
    return {torch::matmul(g[0], w.to(g[0].scalar_type())), Tensor()};
  }
};

struct Model;
Tensor layer_forward(const Model& m, int64_t i, const Tensor& x, const Batch& b);
void layer_grads_done(const Model& m, int64_t layer);

// InUse holds a group of a stage 3 model's parameters whole while a pass uses them (a
// layer, or with kRest those outside the layers), gathered from the ranks' parts, and
// releases them after; on any other model it does nothing.
constexpr int64_t kRest = -1;
struct InUse {
  InUse(const Model& m, int64_t group);
  ~InUse();
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;
  Model* m = nullptr;
  int64_t group = 0;
};

// Per-layer activation checkpointing: the forward keeps only the layer input; the
// backward recomputes the layer with grad enabled and back-propagates through it, which
// accumulates the parameter gradients directly.
struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  // The batch's RoPE tables and lengths are saved by value: the batch itself is gone by
  // the time the backward runs. The model outlives every graph built on it.
  static Tensor forward(AutogradContext* ctx, Tensor x, const Model* m, int64_t layer,
                        const Batch* b) {
    ctx->save_for_backward({x, b->cos, b->sin, b->cos_local, b->sin_local});
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(m);
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["lens"] = b->lens;
    // The recompute must draw the same dropout masks.
    ctx->saved_data["adapters"] = b->adapters;
    ctx->saved_data["drop_p"] = b->drop_p;
    ctx->saved_data["drop_seed"] = b->drop_seed;
    torch::NoGradGuard no_grad;
    InUse use(*m, layer);
    return layer_forward(*m, layer, x, *b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto m = reinterpret_cast<const Model*>(ctx->saved_data["model"].toInt());
    auto layer = ctx->saved_data["layer"].toInt();
    auto saved = ctx->get_saved_variables();
    Batch b;
    b.cos = saved[1];
    b.sin = saved[2];
    b.cos_local = saved[3];
    b.sin_local = saved[4];
    b.lens = ctx->saved_data["lens"].toIntVector();
    b.adapters = ctx->saved_data["adapters"].toBool();
    b.drop_p = ctx->saved_data["drop_p"].toDouble();
    b.drop_seed = ctx->saved_data["drop_seed"].toInt();
    auto x = saved[0].detach().requires_grad_(true);
    {
      InUse use(*m, layer);
      torch::AutoGradMode grad(true);
      auto y = layer_forward(*m, layer, x, b);
      torch::autograd::backward({y}, {grad_out[0]});
      layer_grads_done(*m, layer);  // before the release: the sums read the gradients only
    }
    return {x.grad(), Tensor(), Tensor(), Tensor()};
  }
};

struct Model {
  umad_model_config cfg{};
  torch::Device device = torch::kCPU;
  torch::Dtype param_dtype = torch::kFloat32;
  torch::Dtype compute_dtype = torch::kFloat32;
  // Checkpoint order and the expected shape of every tensor.
  std::vector<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, Tensor> params;
  std::set<std::string> loaded;
  bool ready = false;
  // LoRA: adapter tensor names; base weight name -> (layer, target) of its adapter.
  std::set<std::string> adapters;
  std::map<std::string, std::pair<int64_t, int>> adapted;
  double lora_scale = 0;
  mutable int64_t passes = 0;  // training passes since the last optimizer step (dropout seeds)

  Tensor embed, final_norm, lm_head;
  std::vector<Layer> layers;
  Tensor inv_freq;  // [hd/2], float32 (float64 for float64 models)
  Tensor inv_freq_local;  // Gemma 3's sliding-window layers, at rope_local_theta

  // AdamW state, only for trainable models.
  std::map<std::string, Tensor> exp_avg, exp_avg_sq;
  int64_t step = 0, skipped_total = 0;
  // Sharded over shard_world ranks (ZeRO stage 1, umad::shard_optimizer): exp_avg holds
  // only this rank's part of a parameter, flat, from element shard_off; the parameters
  // outside the part have no moments here. gathered_* are whole moments a checkpoint reads.
  int shard_rank = 0, shard_world = 1;
  std::map<std::string, int64_t> shard_off;
  std::map<std::string, Tensor> gathered_avg, gathered_avg_sq;
  // ZeRO stage 2 (umad::shard_gradients): grad_comm sums the gradients over the ranks as
  // the backward completes them, layer_trained[i] and rest_trained are the trained names
  // it sums at a time (checkpoint order), grad_part is this rank's part of the sums (laid
  // out as exp_avg) and grad_seen the names this rank had a gradient for.
  std::shared_ptr<umad::GradComm> grad_comm;
  std::vector<std::vector<std::string>> layer_trained;
  std::vector<std::string> rest_trained;
  std::map<std::string, Tensor> grad_part;
  std::set<std::string> grad_seen;
  std::function<void()> pending_sums;  // the sums reduce_grads started last
  // ZeRO stage 3 (umad::shard_weights): every parameter's data is released except while a
  // pass uses it (InUse); w_part is this rank's part of the parameters laid end to end in
  // checkpoint order (elements [w_bounds[rank], w_bounds[rank + 1]), each from w_start),
  // the masters its optimizer steps update; w_layers and w_rest are the groups gathered at
  // a time; whole counts the callers holding every parameter whole (reads of the weights).
  std::shared_ptr<umad::GradComm> w_comm;
  std::vector<int64_t> w_bounds;
  std::map<std::string, int64_t> w_start;
  std::vector<std::vector<std::string>> w_layers;
  std::vector<std::string> w_rest;
  std::map<std::string, Tensor> w_part;
  int whole = 0;

  void expect(const std::string& name, std::vector<int64_t> shape) {
    names.push_back(name);
    shapes[name] = std::move(shape);
  }

  explicit Model(const umad_model_config& c) : cfg(c) {
    if (c.arch < 0 || c.arch >= UMAD_ARCH_COUNT)
      throw ArgError("unknown architecture code " + std::to_string(c.arch));
    if (gemma3() && (c.sliding_window <= 0 || !(c.rope_local_theta > 0)))
      throw ArgError("gemma3 needs a positive sliding window and local rope base");
    if (c.query_pre_attn_scalar < 0 || (c.query_pre_attn_scalar > 0 && !gemma3()))
      throw ArgError("query_pre_attn_scalar is Gemma 3's and must be positive");
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
      if (gemma3()) expect(p + "pre_feedforward_layernorm.weight", {H});
      expect(p + "mlp.gate_proj.weight", {I, H});
      expect(p + "mlp.up_proj.weight", {I, H});
      expect(p + "mlp.down_proj.weight", {H, I});
      if (gemma3()) expect(p + "post_feedforward_layernorm.weight", {H});
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

  static void check_lora(const umad_model_config& c) {
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

  // PEFT's adapters on every target of every layer: A kaiming-uniform(a=sqrt(5)), that is
  // U(-1/sqrt(in), 1/sqrt(in)), from a generator seeded per (layer, target); B zeros.
  void add_adapters() {
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

  bool lora() const { return cfg.lora_rank > 0; }
  bool gemma3() const { return cfg.arch == UMAD_ARCH_GEMMA3; }
  // Gemma 3: every sixth layer attends globally, the others over the sliding window.
  bool local_layer(int64_t i) const { return gemma3() && (i + 1) % 6 != 0; }

  void bind() {
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
      if (gemma3()) {
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

  // RoPE frequencies as Hugging Face computes them (float32 unless the model is float64),
  // including the llama3 long-context scaling.
  void init_rope() {
    auto dt = param_dtype == torch::kDouble ? torch::kDouble : torch::kFloat32;
    const int64_t hd = cfg.head_dim;
    auto exps = torch::arange(0, hd, 2, torch::kInt64).to(dt) / double(hd);
    inv_freq = 1.0 / torch::pow(cfg.rope_theta, exps);
    if (gemma3()) inv_freq_local = (1.0 / torch::pow(cfg.rope_local_theta, exps)).to(device);
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

  // Everything trains, or with LoRA the adapters only. A model sharded from the start
  // (cfg.shard_world) holds only its part of the moments: they are never whole here.
  void set_trainable() {
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

  // moment_options are where the moments of parameter p live: beside it, or offloaded to
  // host memory (pinned next to a GPU, so the step's copies need no staging).
  torch::TensorOptions moment_options(const Tensor& p) const {
    auto o = p.options().requires_grad(false);
    if (!cfg.offload_optimizer) return o;
    return o.device(torch::kCPU).pinned_memory(p.is_cuda());
  }

  // moment_parts are the elements [first, second) of each trained tensor in rank's part of
  // world (umad::shard_bounds over the trained tensors in checkpoint order); a tensor
  // wholly in other ranks' parts is not listed.
  std::map<std::string, std::pair<int64_t, int64_t>> moment_parts(int rank, int world) const {
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

  Tensor& lookup(const std::string& name, int32_t what) {
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

  // Weights as used in compute: bf16 copies of the fp32 masters on CUDA (autograd flows
  // back to the masters), the parameters themselves otherwise.
  Tensor W(const Tensor& t) const {
    if (!t.defined() || t.scalar_type() == compute_dtype) return t;
    return t.to(compute_dtype);
  }

  // A projection of layer `layer` with its LoRA adapter (target t) when the pass applies
  // adapters: W x + b + scale B A dropout(x). Frozen weights stored in another dtype than
  // the compute go through CastLinear; a frozen bf16 weight under bf16 compute takes the
  // trained path's exact op, so a bf16 reference computes what its source does.
  Tensor proj(int64_t layer, int t, const Tensor& x, const Tensor& w, const Tensor& bias,
              const Batch& b) const {
    const bool cast = !w.requires_grad() && w.scalar_type() != x.scalar_type();
    Tensor y = cast ? CastLinear::apply(x, w) : torch::linear(x, W(w), W(bias));
    if (cast && bias.defined()) y = y + W(bias);
    const auto& L = layers[layer];
    if (!b.adapters || !L.lora_a[t].defined()) return y;
    auto xin = x;
    if (b.drop_p > 0) {
      // PEFT's dropout: an independent mask per adapter, scaled by 1/(1-p). Drawn on the
      // model's device by its default generator, reseeded per mask, so the checkpoint
      // recompute and a resumed run draw the same one (the plugin's calls are serial; nothing
      // else in the process draws from libtorch's generators).
      auto gen = at::globalContext().defaultGenerator(x.device());
      {
        std::lock_guard<std::mutex> lock(gen.mutex());  // the draw below takes it itself
        gen.set_current_seed(mix(uint64_t(b.drop_seed), uint64_t(layer * kTargets + t)));
      }
      auto keep = torch::empty(x.sizes(), x.options().dtype(torch::kFloat32)).bernoulli_(1 - b.drop_p, gen);
      xin = x * (keep / (1 - b.drop_p)).to(x.scalar_type());
    }
    return y + torch::linear(torch::linear(xin, W(L.lora_a[t])), W(L.lora_b[t])) * lora_scale;
  }

  // A base weight with its adapter folded in, in the parameter dtype.
  Tensor merged(const std::string& name) const {
    torch::NoGradGuard no_grad;
    auto w = params.at(name).detach().to(param_dtype);
    auto it = adapted.find(name);
    if (it == adapted.end()) return w;
    const auto& L = layers[it->second.first];
    int t = it->second.second;
    return w + torch::matmul(L.lora_b[t], L.lora_a[t]) * lora_scale;
  }

  Tensor rms_norm(const Tensor& x, const Tensor& w) const {
    auto dt = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat32;
    auto xf = x.to(dt);
    auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + cfg.rms_norm_eps);
    // Gemma scales by 1 + w, in float32 as Hugging Face does, then casts.
    if (gemma3()) return ((1.0 + W(w).to(dt)) * y).to(compute_dtype);
    return W(w) * y.to(compute_dtype);
  }

  Batch make_batch(const umad_seqs& s) const {
    if (s.n_seqs <= 0) throw ArgError("empty batch");
    if (!s.tokens || !s.prompt_lens || !s.resp_lens) throw ArgError("batch has a NULL array");
    Batch b;
    int64_t total = 0;
    for (int32_t i = 0; i < s.n_seqs; i++) {
      if (s.prompt_lens[i] < 1)
        throw ArgError("sequence " + std::to_string(i) + " has no prompt token");
      if (s.resp_lens[i] < 0)
        throw ArgError("sequence " + std::to_string(i) + " has a negative response length");
      b.lens.push_back(int64_t(s.prompt_lens[i]) + s.resp_lens[i]);
      total += b.lens.back();
    }
    for (int64_t t = 0; t < total; t++)
      if (s.tokens[t] < 0 || s.tokens[t] >= cfg.vocab_size)
        throw ArgError("token id " + std::to_string(s.tokens[t]) + " at position " +
                       std::to_string(t) + " is outside the vocabulary of " +
                       std::to_string(cfg.vocab_size));
    // Host arrays cross to the device once per micro-batch: the tokens and the positions.
    b.tokens = torch::from_blob(const_cast<int32_t*>(s.tokens), {total}, torch::kInt32)
                   .to(device, torch::kInt64);
    std::vector<int64_t> pos;
    pos.reserve(total);
    for (auto L : b.lens)
      for (int64_t p = 0; p < L; p++) pos.push_back(p);
    auto positions = torch::tensor(pos, torch::kInt64).to(device, inv_freq.scalar_type());
    auto freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, hd/2]
    auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);         // [T, 1, hd]
    b.cos = emb.cos().to(compute_dtype);
    b.sin = emb.sin().to(compute_dtype);
    if (gemma3()) {
      auto lf = positions.unsqueeze(1) * inv_freq_local.unsqueeze(0);
      auto le = torch::cat({lf, lf}, -1).unsqueeze(1);
      b.cos_local = le.cos().to(compute_dtype);
      b.sin_local = le.sin().to(compute_dtype);
    }
    return b;
  }

  // Final hidden states [T, H] of a packed batch.
  Tensor hidden(const Batch& b) const {
    // Rows first, then the cast: a bf16-stored table is never copied whole.
    auto x = torch::embedding(embed, b.tokens).to(compute_dtype);
    // Gemma scales the embedding by sqrt(hidden), rounded to the compute dtype as HF does.
    if (gemma3()) x = x * torch::tensor(std::sqrt(double(cfg.hidden_size)), x.options());
    bool ckpt = cfg.grad_checkpoint && torch::GradMode::is_enabled() && cfg.trainable;
    // A frozen embedding (LoRA) gives an input without grad; the checkpointed layers still
    // need a graph to hang their recompute on.
    if (ckpt && !x.requires_grad()) x = x.detach().requires_grad_(true);
    // A stage 3 layer is released after its forward: only a recomputing backward can use it.
    if (w_comm && !ckpt && torch::GradMode::is_enabled() && cfg.trainable)
      throw ArgError("sharded weights (ZeRO stage 3) train with gradient checkpointing only");
    for (int64_t i = 0; i < cfg.num_layers; i++) {
      if (ckpt) {
        x = CheckpointedLayer::apply(x, this, i, &b);
      } else {
        InUse use(*this, i);
        x = layer_forward(*this, i, x, b);
      }
    }
    return rms_norm(x, final_norm);
  }

  // Rows of the hidden states that predict response tokens, and those tokens.
  std::pair<Tensor, Tensor> response_rows(const umad_seqs& s, const Batch& b) const {
    std::vector<int64_t> rows;
    int64_t off = 0;
    for (int32_t i = 0; i < s.n_seqs; i++) {
      for (int32_t r = 0; r < s.resp_lens[i]; r++) rows.push_back(off + s.prompt_lens[i] - 1 + r);
      off += b.lens[i];
    }
    auto idx = torch::tensor(rows, torch::kInt64).to(device);
    return {idx, b.tokens.index_select(0, idx + 1)};
  }

  static constexpr int64_t kKeptLogits = int64_t(1) << 26;

  int64_t pick_chunk(int64_t chunk, int64_t n) const {
    // About 16M logits per chunk (memplan/trainer.go counts the same): 110 rows (64 MiB per
    // f32 buffer) at a 151,936-token vocabulary. Every chunk streams the whole lm_head through
    // the GEMM up to four times (forward; recompute, grad_h and grad_w in the backward), so
    // narrower chunks turn the head memory-bound: 13-row chunks ran the 0.5B update at half
    // PyTorch eager's speed.
    if (chunk == 0) chunk = std::max<int64_t>(1, (int64_t(1) << 24) / cfg.vocab_size);
    return std::max<int64_t>(1, std::min(chunk, std::max<int64_t>(n, 1)));
  }

  // Response-token log-probs and entropies at temperature; chunk < 0 materialises all
  // logits with plain autograd ops (the reference the chunked path is tested against).
  // base_only leaves the LoRA adapters out. A pass with a gradient on a trainable LoRA
  // model applies dropout, seeded by (lora_seed, optimizer step, pass since that step).
  std::pair<Tensor, Tensor> logprobs(const umad_seqs& s, double temperature, int64_t chunk,
                                     bool base_only = false) const {
    if (!(temperature > 0) || !std::isfinite(temperature))
      throw ArgError("temperature must be positive and finite, got " + std::to_string(temperature));
    auto b = make_batch(s);
    b.adapters = lora() && !base_only;
    if (b.adapters && cfg.lora_dropout > 0 && cfg.trainable && torch::GradMode::is_enabled()) {
      b.drop_p = cfg.lora_dropout;
      b.drop_seed = int64_t(mix(mix(cfg.lora_seed, uint64_t(step + skipped_total)), uint64_t(passes++)));
    }
    auto h = hidden(b);
    auto [rows, targets] = response_rows(s, b);
    auto hr = h.index_select(0, rows);
    // A frozen lm_head in another dtype is cast inside chunked_logprobs, per call.
    auto w = lm_head.requires_grad() ? W(lm_head) : lm_head;
    if (chunk < 0) {
      auto dt = h.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat32;
      auto lsm = torch::log_softmax(torch::matmul(hr, w.to(hr.scalar_type()).t()).to(dt) / temperature, -1);
      auto logp = lsm.gather(1, targets.unsqueeze(1)).squeeze(1);
      return {logp, -(lsm.exp() * lsm).sum(-1)};
    }
    // The default chunking keeps the log-softmax for the backward up to kKeptLogits values
    // (256 MiB in f32; memplan/trainer.go counts them); a chunk size the caller chose
    // bounds the training pass's logits to it too.
    const bool keep = chunk == 0 && hr.size(0) * w.size(0) <= kKeptLogits;
    auto out = umad::chunked_logprobs(hr, w, targets, 1.0 / temperature, pick_chunk(chunk, hr.size(0)), keep);
    return {out[0], out[1]};
  }
};

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

Tensor layer_forward(const Model& m, int64_t i, const Tensor& x, const Batch& b) {
  const auto& L = m.layers[i];
  const auto& c = m.cfg;
  const int64_t T = x.size(0), hd = c.head_dim;
  const bool local = m.local_layer(i);
  auto h = m.rms_norm(x, L.ln1);
  auto q = m.proj(i, T_Q, h, L.q_w, L.q_b, b).view({T, c.num_heads, hd});
  auto k = m.proj(i, T_K, h, L.k_w, L.k_b, b).view({T, c.num_kv_heads, hd});
  auto v = m.proj(i, T_V, h, L.v_w, L.v_b, b).view({T, c.num_kv_heads, hd});
  if (c.qk_norm) {
    q = m.rms_norm(q, L.q_norm);
    k = m.rms_norm(k, L.k_norm);
  }
  const auto& cos = local ? b.cos_local : b.cos;
  const auto& sin = local ? b.sin_local : b.sin;
  auto rope = [&](const Tensor& t) {
    auto half = hd / 2;
    auto rot = torch::cat({-t.narrow(-1, half, half), t.narrow(-1, 0, half)}, -1);
    return t * cos + rot * sin;
  };
  q = rope(q);
  k = rope(k);
  // Attention scales scores by 1/sqrt(head_dim); Gemma 3's query_pre_attn_scalar replaces it.
  if (c.query_pre_attn_scalar > 0) q = q * std::sqrt(double(hd) / c.query_pre_attn_scalar);
  // Attention per sequence of the packed row: no compute on other sequences or padding.
  std::vector<Tensor> outs;
  outs.reserve(b.lens.size());
  int64_t off = 0;
  for (auto len : b.lens) {
    auto qs = q.narrow(0, off, len).transpose(0, 1);
    auto ks = k.narrow(0, off, len).transpose(0, 1);
    auto vs = v.narrow(0, off, len).transpose(0, 1);
    outs.push_back(causal_attention(qs, ks, vs, local ? c.sliding_window : 0)
                       .transpose(0, 1)
                       .reshape({len, c.num_heads * hd}));
    off += len;
  }
  auto attn = outs.size() == 1 ? outs[0] : torch::cat(outs, 0);
  auto o = m.proj(i, T_O, attn, L.o_w, Tensor(), b);
  if (m.gemma3()) o = m.rms_norm(o, L.post_attn);
  auto x1 = x + o;
  auto h2 = m.rms_norm(x1, L.ln2);
  // Up before gate: the order the graph was built in before Gemma 3 (gcc evaluated the
  // product's right operand first), so the gradient into h2 sums in the same order.
  auto up = m.proj(i, T_UP, h2, L.up, Tensor(), b);
  auto gate = m.proj(i, T_GATE, h2, L.gate, Tensor(), b);
  auto act = (m.gemma3() ? torch::gelu(gate, "tanh") : torch::silu(gate)) * up;
  auto down = m.proj(i, T_DOWN, act, L.down, Tensor(), b);
  if (m.gemma3()) down = m.rms_norm(down, L.post_ffn);
  return x1 + down;
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

// layer_of is the layer a parameter belongs to (model.layers.N.*), or kRest.
int64_t layer_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  return name.rfind(prefix, 0) == 0 ? std::stoll(name.substr(prefix.size())) : kRest;
}

// released reports whether a stage 3 model's parameters are its parts alone right now.
bool released(const Model& m) { return m.w_comm && m.whole == 0; }

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

struct umad_model {};  // opaque to C; the pointer is a Model*

UMAD_EXPORT int umad_abi_version(void) { return UMAD_TORCH_ABI_VERSION; }

UMAD_EXPORT const char* umad_torch_version(void) { return TORCH_VERSION; }

UMAD_EXPORT const char* umad_torch_cuda_version(void) {
#ifdef UMAD_TORCH_CUDA
  static const std::string v = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  return v.c_str();
#else
  return "";
#endif
}

// The file the loader took libtorch_cpu from: the address of a function it defines names
// it. (at::show_config() reports the version too, but dereferenced a null pointer inside
// pip's PyTorch 2.11 with CUDA when called from here, on an H200; a file name cannot.)
UMAD_EXPORT const char* umad_torch_library_path(void) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&at::set_num_threads), &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

UMAD_EXPORT int umad_set_threads(int32_t n, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    if (n < 1) throw ArgError("thread count must be at least 1, got " + std::to_string(n));
    at::set_num_threads(n);
  });
}

UMAD_EXPORT int umad_cuda_device_count(void) {
  try {
    return cuda_devices();
  } catch (...) {
    return 0;
  }
}

UMAD_EXPORT int umad_check_device(int32_t device, int32_t index, char* err, size_t errlen) {
  return guarded(err, errlen, [&] { device_of(device, index); });
}

UMAD_EXPORT void umad_release_cache(void) {
  umad::empty_cpu_cache();
#ifdef UMAD_TORCH_CUDA
  try {
    if (cuda_used) c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (...) {
  }
#endif
}

UMAD_EXPORT int umad_bench_op(int32_t op, int32_t device, int32_t index, int32_t dtype, int64_t n,
                              int32_t iters, double* seconds, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    if (n < 1 || iters < 1) throw ArgError("bench_op: n and iters must be at least 1");
    if (seconds == nullptr) throw ArgError("bench_op: NULL seconds");
    const torch::Device dev = device_of(device, index);
    cuda_used = cuda_used || dev.is_cuda();
    torch::NoGradGuard no_grad;
    const auto opts = torch::dtype(to_dtype(dtype)).device(dev);
    Tensor a, b, out;
    if (op == UMAD_BENCH_MATMUL) {
      a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts), out = torch::empty({n, n}, opts);
    } else if (op == UMAD_BENCH_COPY) {
      a = torch::randn({n}, opts), out = torch::empty({n}, opts);
    } else {
      throw ArgError("bench_op: unknown op " + std::to_string(op));
    }
    // A GPU runs asynchronously: each timed run ends when the device has finished it.
    auto run = [&] {
      if (op == UMAD_BENCH_MATMUL) {
        torch::mm_out(out, a, b);
      } else {
        out.copy_(a);
      }
      if (dev.is_cuda()) torch::cuda::synchronize(index);
    };
    run();
    double best = std::numeric_limits<double>::infinity();
    for (int32_t i = 0; i < iters; i++) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    *seconds = best;
  });
}

UMAD_EXPORT umad_model* umad_model_create(const umad_model_config* cfg, char* err, size_t errlen) {
  Model* m = nullptr;
  int rc = guarded(err, errlen, [&] {
    if (cfg == nullptr) throw ArgError("NULL config");
    umad::install_cpu_allocator();
    m = new Model(*cfg);
  });
  return rc == UMAD_OK ? reinterpret_cast<umad_model*>(m) : nullptr;
}

UMAD_EXPORT void umad_model_free(umad_model* m) {
  try {
    delete reinterpret_cast<Model*>(m);
  } catch (...) {
  }
}

UMAD_EXPORT int umad_model_set_tensor(umad_model* mp, const char* name, int32_t dtype,
                                      const int64_t* shape, int32_t ndim, const void* data,
                                      char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto m = checked(mp);
    if (name == nullptr || data == nullptr || (ndim > 0 && shape == nullptr) || ndim < 0)
      throw ArgError("set_tensor: NULL name, data or shape");
    std::string n(name);
    if (m->cfg.tie_embeddings && n == "lm_head.weight") return;  // HF ties it; ignore the copy
    auto it = m->shapes.find(n);
    if (it == m->shapes.end()) throw ArgError("unexpected tensor " + n + " for this architecture");
    std::vector<int64_t> got(shape, shape + ndim);
    if (got != it->second)
      throw ArgError("tensor " + n + " has shape " + shape_str(got) + ", expected " +
                     shape_str(it->second));
    auto src = torch::from_blob(const_cast<void*>(data), got, to_dtype(dtype));
    torch::NoGradGuard no_grad;
    m->params.at(n).copy_(src);
    m->loaded.insert(n);
  });
}

UMAD_EXPORT int umad_model_finalize(umad_model* mp, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto m = checked(mp);
    if (m->ready) return;
    std::string missing;
    for (auto& n : m->names)  // adapters start from their initialisation unless set
      if (!m->loaded.count(n) && !m->adapters.count(n)) missing += (missing.empty() ? "" : ", ") + n;
    if (!missing.empty()) throw ArgError("missing tensors: " + missing);
    if (m->cfg.trainable) m->set_trainable();
    m->ready = true;
  });
}

UMAD_EXPORT umad_model* umad_model_clone(const umad_model* mp, int32_t dtype, int32_t trainable,
                                         char* err, size_t errlen) {
  Model* out = nullptr;
  int rc = guarded(err, errlen, [&] {
    auto src = ready(const_cast<umad_model*>(mp));
    if (released(*src)) throw ArgError("clone: the weights are sharded over the ranks (ZeRO stage 3)");
    auto cfg = src->cfg;
    cfg.dtype = dtype;
    if (cfg.compute_dtype != UMAD_BF16 || dtype != UMAD_F32) cfg.compute_dtype = dtype;
    cfg.trainable = trainable;
    cfg.shard_rank = 0, cfg.shard_world = 1;  // a copy's moments start whole
    auto m = std::make_unique<Model>(cfg);
    torch::NoGradGuard no_grad;
    for (auto& n : m->names) {
      m->params.at(n).copy_(src->params.at(n));
      m->loaded.insert(n);
    }
    if (trainable) m->set_trainable();
    m->ready = true;
    out = m.release();
  });
  return rc == UMAD_OK ? reinterpret_cast<umad_model*>(out) : nullptr;
}

UMAD_EXPORT int umad_model_tensor_count(const umad_model* mp) {
  return mp ? int(reinterpret_cast<const Model*>(mp)->names.size()) : 0;
}

UMAD_EXPORT int umad_model_tensor_info(const umad_model* mp, int32_t i, char* name,
                                       size_t namelen, int64_t* shape, int32_t* ndim,
                                       int32_t* dtype, int32_t* adapter) {
  auto m = reinterpret_cast<const Model*>(mp);
  if (!m || i < 0 || size_t(i) >= m->names.size() || !name || !shape || !ndim || !dtype || !adapter)
    return UMAD_ERR_ARG;
  // find, not at: no exception may cross the C ABI (this function is not guarded).
  const auto& n = m->names[i];
  auto si = m->shapes.find(n);
  auto pi = m->params.find(n);
  if (si == m->shapes.end() || pi == m->params.end()) return UMAD_ERR_ARG;
  const auto& s = si->second;
  if (n.size() + 1 > namelen || s.size() > 4) return UMAD_ERR_ARG;
  std::memcpy(name, n.c_str(), n.size() + 1);
  *ndim = int32_t(s.size());
  for (size_t d = 0; d < s.size(); d++) shape[d] = s[d];
  switch (pi->second.scalar_type()) {
    case torch::kFloat64: *dtype = UMAD_F64; break;
    case torch::kBFloat16: *dtype = UMAD_BF16; break;
    default: *dtype = UMAD_F32;
  }
  *adapter = m->adapters.count(n) ? 1 : 0;
  return UMAD_OK;
}

UMAD_EXPORT int umad_model_read(const umad_model* mp, const char* name, int32_t what,
                                int32_t dtype, void* dst, int64_t nbytes, char* err,
                                size_t errlen) {
  return guarded(err, errlen, [&] {
    auto m = checked(const_cast<umad_model*>(mp));
    if (!name || !dst) throw ArgError("read: NULL name or buffer");
    if ((what == UMAD_WEIGHT || what == UMAD_MERGED) && released(*m))
      throw ArgError(std::string(name) + ": the weights are sharded over the ranks (ZeRO stage 3); gather them whole to read them");
    Tensor out;
    if (what == UMAD_MERGED) {
      m->lookup(name, UMAD_WEIGHT);  // names an unknown tensor
      if (m->adapters.count(name)) throw ArgError(std::string(name) + " is an adapter, not a base weight");
      out = m->merged(name);
    } else {
      auto& t = m->lookup(name, what);
      out = t.defined() ? t.detach() : torch::zeros(m->shapes.at(name), torch::dtype(m->param_dtype));
    }
    out = out.to(torch::kCPU, to_dtype(dtype)).contiguous();
    if (int64_t(out.nbytes()) != nbytes)
      throw ArgError("read " + std::string(name) + ": buffer has " + std::to_string(nbytes) +
                     " bytes, tensor needs " + std::to_string(out.nbytes()));
    std::memcpy(dst, out.data_ptr(), out.nbytes());
  });
}

UMAD_EXPORT int umad_model_write(umad_model* mp, const char* name, int32_t what, int32_t dtype,
                                 const void* src, int64_t nbytes, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto m = checked(mp);
    if (!name || !src) throw ArgError("write: NULL name or buffer");
    if (what == UMAD_MERGED) throw ArgError("a merged weight is read-only; write the weight or its adapters");
    if (m->w_comm) throw ArgError(std::string(name) + ": the weights are sharded over the ranks (ZeRO stage 3) and not written");
    if (what == UMAD_GRAD && m->lora() && !m->adapters.count(name))
      throw ArgError(std::string(name) + " is a frozen base weight of a LoRA model: it has no gradient");
    auto& p = m->lookup(name, UMAD_WEIGHT);  // names a tensor
    auto shape = m->shapes.at(name);
    auto in = torch::from_blob(const_cast<void*>(src), shape, to_dtype(dtype));
    if (int64_t(in.nbytes()) != nbytes)
      throw ArgError("write " + std::string(name) + ": buffer has " + std::to_string(nbytes) +
                     " bytes, tensor needs " + std::to_string(in.nbytes()));
    torch::NoGradGuard no_grad;
    if ((what == UMAD_EXP_AVG || what == UMAD_EXP_AVG_SQ) && m->shard_world > 1) {
      // This rank's part of the whole moment given (a checkpoint read by a sharded model).
      if (!p.requires_grad()) throw ArgError(std::string(name) + " is not trained: it has no optimizer state");
      auto& st = what == UMAD_EXP_AVG ? m->exp_avg : m->exp_avg_sq;
      auto it = st.find(name);
      if (it != st.end()) it->second.copy_(in.reshape({-1}).narrow(0, m->shard_off.at(name), it->second.numel()));
      return;
    }
    auto& t = m->lookup(name, what);
    if (!t.defined()) t = torch::zeros(shape, torch::dtype(m->param_dtype).device(m->device));
    t.copy_(in);
  });
}

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

UMAD_EXPORT int umad_logprobs(umad_model* mp, const umad_seqs* seqs, double temperature,
                              int64_t logit_chunk, int32_t base_only, float* logp, float* entropy,
                              char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
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

UMAD_EXPORT int umad_zero_grad(umad_model* mp) {
  auto m = reinterpret_cast<Model*>(mp);
  if (!m) return UMAD_ERR_ARG;
  for (auto& kv : m->params) kv.second.mutable_grad() = Tensor();
  m->grad_part.clear();
  m->grad_seen.clear();
  return UMAD_OK;
}

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

UMAD_EXPORT int umad_optim_step(umad_model* mp, const umad_adamw* opt, umad_step_stats* stats,
                                char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
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

namespace umad {

int guard(char* err, size_t errlen, const std::function<void()>& f) {
  return guarded(err, errlen, f);
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
