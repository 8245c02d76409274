// The model of libumad_torch as its translation units share it (not part of the C ABI): the
// Model with its layers and a packed batch, and the helpers the C ABI's entry points call.
// Its jobs live in their own files: construction and the tensors (umad_model.cpp), the
// forward (umad_forward.cpp), the ZeRO stages on a model (umad_zero.cpp), and the entry
// points (umad_torch.cpp, umad_passes.cpp, umad_step.cpp).
#ifndef UMAD_MODEL_H
#define UMAD_MODEL_H

#include "umad_internal.h"
#include "umad_torch.h"

#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace umad {

using torch::Tensor;

inline void set_err(char* err, size_t errlen, const char* msg) {
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

torch::Dtype to_dtype(int32_t d);

// GPUs libtorch sees, -1 when this plugin's libtorch has no CUDA at all (Debian's CPU build).
int cuda_devices();

// cuda_used says a model was placed on a GPU: there is a cache to release.
extern bool cuda_used;

// device_of is where a model asked for (device, index) lives, or one line saying why not.
torch::Device device_of(int32_t device, int32_t index);

// splitmix64: derives independent seeds (adapter inits, dropout masks) from one.
inline uint64_t mix(uint64_t a, uint64_t b) {
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
  Tensor post_attn, post_ffn;  // sandwich norms after attention and MLP (cfg.sandwich_norm)
  Tensor lora_a[kTargets], lora_b[kTargets];  // undefined where a target has no adapter
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
  Tensor inv_freq_local;  // the sliding-window layers', at rope_local_theta

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

  explicit Model(const umad_model_config& c);

  static void check_lora(const umad_model_config& c);

  // PEFT's adapters on every target of every layer: A kaiming-uniform(a=sqrt(5)), that is
  // U(-1/sqrt(in), 1/sqrt(in)), from a generator seeded per (layer, target); B zeros.
  void add_adapters();

  bool lora() const { return cfg.lora_rank > 0; }
  // Every sliding_window_pattern-th layer attends globally, the others over the window.
  bool local_layer(int64_t i) const {
    return cfg.sliding_window_pattern > 0 && (i + 1) % cfg.sliding_window_pattern != 0;
  }

  void bind();

  // RoPE frequencies as Hugging Face computes them (float32 unless the model is float64),
  // including the llama3 long-context scaling.
  void init_rope();

  // Everything trains, or with LoRA the adapters only. A model sharded from the start
  // (cfg.shard_world) holds only its part of the moments: they are never whole here.
  void set_trainable();

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
  std::map<std::string, std::pair<int64_t, int64_t>> moment_parts(int rank, int world) const;

  Tensor& lookup(const std::string& name, int32_t what);

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
              const Batch& b) const;

  // A base weight with its adapter folded in, in the parameter dtype.
  Tensor merged(const std::string& name) const;

  Tensor rms_norm(const Tensor& x, const Tensor& w) const;

  Batch make_batch(const umad_seqs& s) const;

  // Final hidden states [T, H] of a packed batch.
  Tensor hidden(const Batch& b) const;

  // Rows of the hidden states that predict response tokens, and those tokens.
  std::pair<Tensor, Tensor> response_rows(const umad_seqs& s, const Batch& b) const;

  int64_t pick_chunk(int64_t chunk, int64_t n) const;

  // Response-token log-probs and entropies at temperature; chunk < 0 materialises all
  // logits with plain autograd ops (the reference the chunked path is tested against).
  // base_only leaves the LoRA adapters out. A pass with a gradient on a trainable LoRA
  // model applies dropout, seeded by (lora_seed, optimizer step, pass since that step).
  std::pair<Tensor, Tensor> logprobs(const umad_seqs& s, double temperature, int64_t chunk,
                                     bool base_only = false) const;
};

// pass_grads_done sums what a training pass left unsummed (ZeRO stage 2, umad_zero.cpp);
// no_data: this rank had no data for the pass.
void pass_grads_done(Model& m, bool no_data);

// checked is the model behind a C handle; ready, one whose tensors are all set.
Model* checked(umad_model* m);
Model* ready(umad_model* m);

// released reports whether a stage 3 model's parameters are its parts alone right now.
bool released(const Model& m);

}  // namespace umad

#endif
