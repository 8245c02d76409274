// The forward of a packed batch with Hugging Face semantics (Qwen2/Qwen2.5, Qwen3, Llama 3
// and Gemma 3): attention per sequence, a layer with its LoRA adapters, checkpointed layers,
// the final hidden states and the response tokens' log-probs (the lm_head's chunks are
// umad_logprobs.cpp's).

#include "umad_compat.h"
#include "umad_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

namespace umad {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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

// kKeptLogits is the most log-softmax values a training forward keeps for its backward;
// more are recomputed chunk by chunk.
constexpr int64_t kKeptLogits = int64_t(1) << 26;

}  // namespace

Tensor Model::proj(int64_t layer, int t, const Tensor& x, const Tensor& w, const Tensor& bias,
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

Tensor Model::rms_norm(const Tensor& x, const Tensor& w) const {
  auto dt = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat32;
  auto xf = x.to(dt);
  auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + cfg.rms_norm_eps);
  // An offset weight (Gemma's 1 + w) scales in float32 as Hugging Face does, then casts.
  if (cfg.norm_offset != 0) return ((cfg.norm_offset + W(w).to(dt)) * y).to(compute_dtype);
  return W(w) * y.to(compute_dtype);
}

Batch Model::make_batch(const umad_seqs& s) const {
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
  if (cfg.sliding_window_pattern > 0) {
    auto lf = positions.unsqueeze(1) * inv_freq_local.unsqueeze(0);
    auto le = torch::cat({lf, lf}, -1).unsqueeze(1);
    b.cos_local = le.cos().to(compute_dtype);
    b.sin_local = le.sin().to(compute_dtype);
  }
  return b;
}

Tensor Model::hidden(const Batch& b) const {
  // Rows first, then the cast: a bf16-stored table is never copied whole.
  auto x = torch::embedding(embed, b.tokens).to(compute_dtype);
  // embed_scale (Gemma): times sqrt(hidden), rounded to the compute dtype as HF does.
  if (cfg.embed_scale) x = x * torch::tensor(std::sqrt(double(cfg.hidden_size)), x.options());
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

std::pair<Tensor, Tensor> Model::response_rows(const umad_seqs& s, const Batch& b) const {
  std::vector<int64_t> rows;
  int64_t off = 0;
  for (int32_t i = 0; i < s.n_seqs; i++) {
    for (int32_t r = 0; r < s.resp_lens[i]; r++) rows.push_back(off + s.prompt_lens[i] - 1 + r);
    off += b.lens[i];
  }
  auto idx = torch::tensor(rows, torch::kInt64).to(device);
  return {idx, b.tokens.index_select(0, idx + 1)};
}

int64_t Model::pick_chunk(int64_t chunk, int64_t n) const {
  // About 16M logits per chunk (memplan/trainer.go counts the same): 110 rows (64 MiB per
  // f32 buffer) at a 151,936-token vocabulary. Every chunk streams the whole lm_head through
  // the GEMM up to four times (forward; recompute, grad_h and grad_w in the backward), so
  // narrower chunks turn the head memory-bound: 13-row chunks ran the 0.5B update at half
  // PyTorch eager's speed.
  if (chunk == 0) chunk = std::max<int64_t>(1, (int64_t(1) << 24) / cfg.vocab_size);
  return std::max<int64_t>(1, std::min(chunk, std::max<int64_t>(n, 1)));
}

std::pair<Tensor, Tensor> Model::logprobs(const umad_seqs& s, double temperature, int64_t chunk,
                                            bool base_only) const {
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
  // Attention scales scores by 1/sqrt(head_dim); a query_pre_attn_scalar (Gemma 3's) replaces it.
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
  if (c.sandwich_norm) o = m.rms_norm(o, L.post_attn);
  auto x1 = x + o;
  auto h2 = m.rms_norm(x1, L.ln2);
  // Up before gate: the order the graph was built in before Gemma 3 (gcc evaluated the
  // product's right operand first), so the gradient into h2 sums in the same order.
  auto up = m.proj(i, T_UP, h2, L.up, Tensor(), b);
  auto gate = m.proj(i, T_GATE, h2, L.gate, Tensor(), b);
  auto act = (c.activation == UMAD_ACT_GELU_TANH ? torch::gelu(gate, "tanh") : torch::silu(gate)) * up;
  auto down = m.proj(i, T_DOWN, act, L.down, Tensor(), b);
  if (c.sandwich_norm) down = m.rms_norm(down, L.post_ffn);
  return x1 + down;
}

}  // namespace umad
