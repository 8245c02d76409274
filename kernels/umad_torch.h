/*
 * umad_torch.h: the C ABI of libumad_torch, the libtorch plugin of umad.
 *
 * Conventions: plain C types only; every fallible call returns 0 on success or a
 * nonzero code and writes a message into (err, errlen). Buffers passed in are read
 * or written during the call only and never retained. No C++ exception crosses
 * this boundary. All calls on one model must come from one thread (the Go side
 * routes every call through one goroutine locked to its OS thread).
 */
#ifndef UMAD_TORCH_H
#define UMAD_TORCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any change to a signature, struct or enum below, and append the new version's line
 * to umad_torch.abi (cgo/torch's TestABIDigest fails until both are done). */
#define UMAD_TORCH_ABI_VERSION 15

enum {
  UMAD_OK = 0,
  UMAD_ERR_ARG = 1,   /* bad argument: shape, name, range, state */
  UMAD_ERR_TORCH = 2, /* libtorch raised an error */
  UMAD_ERR_NONFINITE = 3
};

/* The MLP's gate activation: SiLU (Llama, Qwen) or GeLU in its tanh form (Gemma). */
enum { UMAD_ACT_SILU = 0, UMAD_ACT_GELU_TANH = 1 };
enum { UMAD_F32 = 0, UMAD_F64 = 1, UMAD_BF16 = 2, UMAD_F16 = 3 };
enum { UMAD_CPU = 0, UMAD_CUDA = 1 };

/* What a tensor read/write addresses. UMAD_MERGED reads a base weight with its LoRA
 * adapter folded in, W + alpha/r B A (the weight itself where there is no adapter). */
enum { UMAD_WEIGHT = 0, UMAD_GRAD = 1, UMAD_EXP_AVG = 2, UMAD_EXP_AVG_SQ = 3, UMAD_MERGED = 4 };

/* LoRA target projections, bits of umad_model_config.lora_targets (HF q_proj ... down_proj). */
enum {
  UMAD_LORA_Q = 1,
  UMAD_LORA_K = 2,
  UMAD_LORA_V = 4,
  UMAD_LORA_O = 8,
  UMAD_LORA_GATE = 16,
  UMAD_LORA_UP = 32,
  UMAD_LORA_DOWN = 64
};

enum {
  UMAD_AGG_TOKEN_MEAN = 0,
  UMAD_AGG_SEQ_MEAN_TOKEN_SUM = 1,
  UMAD_AGG_SEQ_MEAN_TOKEN_MEAN = 2,
  UMAD_AGG_SEQ_MEAN_TOKEN_SUM_NORM = 3
};

enum { UMAD_KL_K1 = 0, UMAD_KL_K2 = 1, UMAD_KL_K3 = 2 };

/* What umad_bench_op times: an m x k by k x n matrix product, or a copy of n elements. */
enum { UMAD_BENCH_MATMUL = 0, UMAD_BENCH_COPY = 1 };

/* A model's shape and its architecture's traits: the forward and the tensors it expects read
 * these alone, never an architecture's name, so an architecture made of known traits needs
 * no change here. The zero value of every trait is Llama's. */
typedef struct umad_model_config {
  int64_t vocab_size, hidden_size, intermediate_size;
  int64_t num_layers, num_heads, num_kv_heads, head_dim;
  double rope_theta, rms_norm_eps;
  int32_t tie_embeddings; /* lm_head shares model.embed_tokens.weight */
  int32_t attention_bias; /* q/k/v projections have biases (Qwen2) */
  int32_t qk_norm;        /* per-head RMSNorm on q and k before RoPE (Qwen3) */
  int32_t embed_scale;    /* the embedding's rows are scaled by sqrt(hidden_size) (Gemma 3) */
  int32_t activation;     /* UMAD_ACT_* */
  /* RMS norms scale by (norm_offset + w), in float32 before the cast to the compute dtype, where
   * it is not 0 (Gemma: 1); with 0, by w after the cast (Llama). */
  double norm_offset;
  /* Sandwich norms (Gemma 2/3): post_attention_layernorm normalises the attention's output,
   * pre_feedforward_layernorm the MLP's input and post_feedforward_layernorm its output. */
  int32_t sandwich_norm;
  /* llama3 RoPE scaling; rope_scaling_factor 0 means none. */
  double rope_scaling_factor, rope_low_freq_factor, rope_high_freq_factor;
  int64_t rope_original_max_positions;
  /* Parameter dtype (UMAD_F32 or UMAD_F64) and compute dtype: the parameter dtype, or
   * UMAD_BF16 over UMAD_F32 parameters (mixed precision: the parameters are fp32 masters with
   * fp32 gradients and AdamW state, each weight is cast to bf16 where it is used, norms and
   * softmax run in fp32). Under bf16 compute, frozen tensors (every tensor of a model that is
   * not trainable, a LoRA base) are stored in bf16: they are only ever used cast to bf16, so
   * that is exact and halves them. The compute dtype does not depend on the device. */
  int32_t dtype, compute_dtype;
  /* UMAD_CPU (index 0) or UMAD_CUDA with device_index N (cuda:N). Every tensor of the model
   * lives there; see umad_check_device for what may be asked. */
  int32_t device, device_index;
  int32_t trainable;       /* parameters require grad; an optimizer state exists */
  int32_t grad_checkpoint; /* recompute each layer in backward instead of storing it */
  /* LoRA (0 rank: none). Each target projection y = W x gets + alpha/rank B A dropout(x),
   * A [rank, in] kaiming-uniform from lora_seed, B [out, rank] zeros, in the parameter dtype.
   * The base is frozen: only the adapters train and have optimizer state. Dropout (PEFT's,
   * on the adapter input) runs only in passes with a gradient; its masks derive from
   * lora_seed, the optimizer step and the pass within it, so a resumed run repeats them. */
  int32_t lora_rank, lora_targets;
  double lora_alpha, lora_dropout;
  uint64_t lora_seed;
  int32_t base_bf16; /* with LoRA: frozen base weights stored in bf16, cast per use */
  /* Sliding-window layers (Gemma 3): with a pattern p > 0, layer i attends over the last
   * sliding_window tokens at RoPE base rope_local_theta unless (i + 1) is a multiple of p,
   * and then globally; 0: every layer attends globally. */
  int32_t sliding_window_pattern;
  int64_t sliding_window;
  double rope_local_theta;
  /* query_pre_attn_scalar (Gemma 3's) where it is not head_dim: attention scores are scaled
   * by 1/sqrt(it) instead of 1/sqrt(head_dim). 0: head_dim. */
  double query_pre_attn_scalar;
  /* ZeRO: a trainable model whose AdamW moments are part shard_rank of shard_world from the
   * start (umad_internal.h's shard_bounds): they are never whole, and a write of a moment
   * keeps this part of the whole tensor given. 0 or 1 ranks: whole. */
  int32_t shard_rank, shard_world;
  /* A trainable model's AdamW moments in host memory (pinned next to a GPU), and their
   * update on the CPU: the gradient goes to them and the updated weights come back, a chunk
   * at a time (--offload optimizer). On the CPU it changes nothing. */
  int32_t offload_optimizer;
} umad_model_config;

typedef struct umad_model umad_model;

/* A micro-batch of sequences: sequence i is prompt_lens[i] prompt tokens followed by
 * resp_lens[i] response tokens; tokens holds all sequences back to back. Per-token
 * arrays (outputs and loss inputs) hold the response tokens of all sequences back to
 * back, sum(resp_lens) entries. */
typedef struct umad_seqs {
  int32_t n_seqs;
  const int32_t* tokens;
  const int32_t* prompt_lens;
  const int32_t* resp_lens;
} umad_seqs;

/* Per response-token inputs of the policy loss; NULL means absent. */
typedef struct umad_token_inputs {
  const float* old_logp;  /* required */
  const float* advantage; /* required */
  const float* ref_logp;  /* required when kl_coef != 0 */
  const float* is_weight; /* truncated importance-sampling weights */
  const float* mask;      /* 0/1 loss mask; NULL means all ones */
} umad_token_inputs;

/* The policy loss, by name, and its settings. Every loss of the plugin's table
 * (kernels/umad_losses.cpp) takes this one block, so adding a loss changes no struct and no
 * signature: each loss reads the fields its entry there documents and refuses a setting it
 * cannot honour. */
typedef struct umad_policy_params {
  const char* name;           /* "ppo", ...: an entry of the table */
  double clip_low, clip_high; /* the loss's clip range [1-clip_low, 1+clip_high] */
  double clip_c;              /* dual clip bound for A<0 (ppo); 0 disables */
  double extra[4];            /* settings of a loss that needs more than these; zero otherwise */
} umad_policy_params;

typedef struct umad_loss_config {
  umad_policy_params policy;
  double temperature;
  int32_t agg_mode;
  double norm_length; /* seq-mean-token-sum-norm divisor; 0 means longest response */
  int32_t kl_estimator;
  double kl_coef, entropy_coef;
  int64_t logit_chunk; /* rows per lm_head chunk; 0 picks one, <0 materialises */
} umad_loss_config;

typedef struct umad_loss_stats {
  double loss;    /* total loss of the micro-batch, before scale */
  double pg_loss; /* policy-gradient term */
  double kl;      /* token mean of the KL estimator (0 without ref_logp) */
  double entropy; /* token mean of the entropy */
  double clipfrac, clipfrac_lower, ppo_kl;
  int64_t tokens; /* masked-in response tokens */
} umad_loss_stats;

typedef struct umad_adamw {
  double lr, beta1, beta2, eps, weight_decay;
  double max_grad_norm; /* <= 0 disables clipping */
} umad_adamw;

/* A process group over c10d (kernels/umad_dist.cpp): TCPStore rendezvous at host:port,
 * which rank 0 hosts, or, for a host file://PATH, a FileStore at PATH (every rank on one
 * machine; port unused), and Gloo (or NCCL where the libtorch has it) collectives. */
typedef struct umad_dist umad_dist;
enum { UMAD_BACKEND_GLOO = 0, UMAD_BACKEND_NCCL = 1 };
enum { UMAD_REDUCE_SUM = 0, UMAD_REDUCE_MAX = 1 };

typedef struct umad_step_stats {
  double grad_norm; /* global norm before clipping */
  int32_t skipped;  /* the norm was not finite: no update, gradients dropped */
  int64_t step, skipped_total;
} umad_step_stats;

/* Every entry point, once. X(return type, name, (parameters), (argument names)) declares
 * umad_<name>; V(name, (parameters), (argument names)) one that returns nothing. The
 * declarations below and the Go loader's dlsym table and call wrappers (cgo/torch/plugin.c)
 * are all generated from this list, so a new entry point is one line here plus its body in
 * the translation unit of its job (and a bump of UMAD_TORCH_ABI_VERSION). */
#define UMAD_TORCH_API(X, V)                                                                     \
  X(int, abi_version, (void), ())                                                                \
  /* libtorch version the plugin was built against, e.g. "1.13.0". */                            \
  X(const char*, torch_version, (void), ())                                                      \
  /* File of the libtorch_cpu this process loaded ("" if unknown); the Go side reads its     \
     version from it, which differs from torch_version when the libtorch under the plugin   \
     was replaced (a pip upgrade). */                                                        \
  X(const char*, torch_library_path, (void), ())                                                 \
  /* CUDA version a CUDA plugin was built against ("12.4"); "" for a CPU build. */             \
  X(const char*, torch_cuda_version, (void), ())                                                 \
  X(int, set_threads, (int32_t n, char* err, size_t errlen), (n, err, errlen))                   \
  /* GPUs libtorch sees; -1 when the plugin was built against a libtorch without CUDA. */      \
  X(int, cuda_device_count, (void), ())                                                          \
  /* 0 when a model may live on (device, index); else the one-line reason it may not. */       \
  X(int, check_device, (int32_t device, int32_t index, char* err, size_t errlen),                \
    (device, index, err, errlen))                                                                \
  /* Returns libtorch's cached, unused GPU memory to the driver and the plugin's cached CPU     \
   * blocks to the system (between phases, so that llama.cpp can have them). */                 \
  V(release_cache, (void), ())                                                                   \
  /* The best time in seconds of iters runs of op (UMAD_BENCH_*) on (device, index) in dtype,     \
   * after one warm-up run: the peak that `umad bench train` measures the trainer against. */    \
  X(int, bench_op,                                                                               \
    (int32_t op, int32_t device, int32_t index, int32_t dtype, int64_t m, int64_t k, int64_t n,  \
     int32_t iters, double* seconds, char* err, size_t errlen),                                  \
    (op, device, index, dtype, m, k, n, iters, seconds, err, errlen))                            \
                                                                                                 \
  X(umad_model*, model_create, (const umad_model_config* cfg, char* err, size_t errlen),         \
    (cfg, err, errlen))                                                                          \
  V(model_free, (umad_model* m), (m))                                                            \
  /* Copies one named HF tensor (data in dtype with the given shape) into the model. */          \
  X(int, model_set_tensor,                                                                       \
    (umad_model* m, const char* name, int32_t dtype, const int64_t* shape, int32_t ndim,         \
     const void* data, char* err, size_t errlen),                                                \
    (m, name, dtype, shape, ndim, data, err, errlen))                                            \
  /* Checks that every expected tensor was set; the model is usable afterwards. */               \
  X(int, model_finalize, (umad_model* m, char* err, size_t errlen), (m, err, errlen))            \
  /* A copy of m's current weights in dtype; frozen (no grad, no optimizer) unless trainable. */ \
  X(umad_model*, model_clone,                                                                    \
    (const umad_model* m, int32_t dtype, int32_t trainable, char* err, size_t errlen),           \
    (m, dtype, trainable, err, errlen))                                                          \
                                                                                                 \
  /* Tensor i in checkpoint order (base, then LoRA adapters): name, shape (at most 4 dims),   \
   * storage dtype and whether it is a LoRA adapter (PEFT names, ...q_proj.lora_A.weight). */  \
  X(int, model_tensor_count, (const umad_model* m), (m))                                         \
  X(int, model_tensor_info,                                                                      \
    (const umad_model* m, int32_t i, char* name, size_t namelen, int64_t* shape, int32_t* ndim, \
     int32_t* dtype, int32_t* adapter),                                                          \
    (m, i, name, namelen, shape, ndim, dtype, adapter))                                          \
  /* Copy a tensor (what: UMAD_WEIGHT, ...) out to dst as dtype; nbytes must match. A            \
   * missing gradient reads as zeros. */                                                         \
  X(int, model_read,                                                                             \
    (const umad_model* m, const char* name, int32_t what, int32_t dtype, void* dst,              \
     int64_t nbytes, char* err, size_t errlen),                                                  \
    (m, name, what, dtype, dst, nbytes, err, errlen))                                            \
  X(int, model_write,                                                                            \
    (umad_model* m, const char* name, int32_t what, int32_t dtype, const void* src,              \
     int64_t nbytes, char* err, size_t errlen),                                                  \
    (m, name, what, dtype, src, nbytes, err, errlen))                                            \
  X(int, optim_get, (const umad_model* m, int64_t* step, int64_t* skipped_total),                \
    (m, step, skipped_total))                                                                    \
  X(int, optim_set, (umad_model* m, int64_t step, int64_t skipped_total),                        \
    (m, step, skipped_total))                                                                    \
                                                                                                 \
  /* Log-probs and entropies of the response tokens under softmax(logits/temperature); with    \
   * base_only, of the base without its LoRA adapters (the KL reference of a LoRA run). */     \
  X(int, logprobs,                                                                               \
    (umad_model* m, const umad_seqs* seqs, double temperature, int64_t logit_chunk,              \
     int32_t base_only, float* logp, float* entropy, char* err, size_t errlen),                  \
    (m, seqs, temperature, logit_chunk, base_only, logp, entropy, err, errlen))                  \
  /* The policy loss of one micro-batch; with backward != 0, adds scale * d loss / d params      \
   * to the gradients. logp_out (optional) receives the current log-probs. */                    \
  X(int, policy_loss,                                                                            \
    (umad_model* m, const umad_seqs* seqs, const umad_token_inputs* in,                          \
     const umad_loss_config* cfg, int32_t backward, double scale, umad_loss_stats* stats,        \
     float* logp_out, char* err, size_t errlen),                                                 \
    (m, seqs, in, cfg, backward, scale, stats, logp_out, err, errlen))                           \
  /* Token-mean cross-entropy of the response tokens (temperature 1). */                         \
  X(int, sft_loss,                                                                               \
    (umad_model* m, const umad_seqs* seqs, int64_t logit_chunk, int32_t backward, double scale,  \
     double* loss, char* err, size_t errlen),                                                    \
    (m, seqs, logit_chunk, backward, scale, loss, err, errlen))                                  \
  /* Per-token KL estimate between policy and reference log-probs. */                            \
  X(int, kl,                                                                                     \
    (const float* logp, const float* ref_logp, int64_t n, int32_t estimator, float* out,         \
     char* err, size_t errlen),                                                                  \
    (logp, ref_logp, n, estimator, out, err, errlen))                                            \
  /* Clip, AdamW update, zero the gradients. */                                                  \
  X(int, optim_step,                                                                             \
    (umad_model* m, const umad_adamw* opt, umad_step_stats* stats, char* err, size_t errlen),    \
    (m, opt, stats, err, errlen))                                                                \
  X(int, zero_grad, (umad_model* m), (m))                                                        \
                                                                                                 \
  /* Joins the process group of world ranks (blocks until all joined or timeout_s passed; the    \
   * timeout also bounds every collective). */                                                  \
  X(umad_dist*, dist_init,                                                                       \
    (const char* host, int32_t port, int32_t rank, int32_t world, int32_t backend,               \
     double timeout_s, char* err, size_t errlen),                                                \
    (host, port, rank, world, backend, timeout_s, err, errlen))                                  \
  V(dist_free, (umad_dist* d), (d))                                                              \
  /* The process group of ranks (n of them, increasing, this rank among them) over d's store,   \
   * under name: every member calls it with the same name and ranks, the others do not. Its    \
   * ranks are their places in ranks; free it with dist_free. */                                \
  X(umad_dist*, dist_subgroup,                                                                   \
    (umad_dist* d, const char* name, const int32_t* ranks, int32_t n, char* err, size_t errlen), \
    (d, name, ranks, n, err, errlen))                                                            \
  /* Publishes data under key for this rank, then checks that every rank published the same;     \
   * the message names the first rank that differs. */                                          \
  X(int, dist_agree,                                                                             \
    (umad_dist* d, const char* key, const void* data, int64_t n, char* err, size_t errlen),      \
    (d, key, data, n, err, errlen))                                                              \
  /* Copies root's weights, and a trainable model's AdamW moments unless they are sharded (each \
   * rank read its part), into every rank's model. */                                           \
  X(int, dist_broadcast_model, (umad_dist* d, umad_model* m, int32_t root, char* err,            \
    size_t errlen), (d, m, root, err, errlen))                                                   \
  /* Sums the gradients over the ranks in buckets of about bucket_bytes (a rank without a        \
   * gradient contributes zeros; a tensor no rank has a gradient for keeps none); bytes gets     \
   * what this rank sent into the reduction. */                                                 \
  X(int, dist_allreduce_grads,                                                                   \
    (umad_dist* d, umad_model* m, int64_t bucket_bytes, int64_t* bytes, char* err,               \
     size_t errlen), (d, m, bucket_bytes, bytes, err, errlen))                                   \
  /* Reduces n doubles in place over the ranks (UMAD_REDUCE_SUM or _MAX). */                    \
  X(int, dist_allreduce_f64, (umad_dist* d, double* data, int64_t n, int32_t op, char* err,      \
    size_t errlen), (d, data, n, op, err, errlen))                                               \
  /* Every rank's bytes, in rank order: lens[world] gets their lengths and *out a malloc'd       \
   * buffer with all of them back to back (the caller frees it; NULL when all are empty). */      \
  X(int, dist_allgather,                                                                         \
    (umad_dist* d, const void* data, int64_t n, int64_t* lens, void** out, char* err,            \
     size_t errlen), (d, data, n, lens, out, err, errlen))                                       \
  X(int, dist_barrier, (umad_dist* d, char* err, size_t errlen), (d, err, errlen))              \
  /* ZeRO stage 1: keeps this rank's part of m's AdamW moments, which the optimizer step then   \
   * updates alone (umad_internal.h's shard_bounds cuts the parts); on a sharded model, drops   \
   * the copy dist_gather_optimizer made. */                                                    \
  X(int, dist_shard_optimizer, (umad_dist* d, umad_model* m, char* err, size_t errlen),          \
    (d, m, err, errlen))                                                                         \
  /* After a sharded step: every rank's updated part of the weights to every rank, all-gathered  \
   * in buckets of about bucket_bytes; bytes gets what this rank sent. */                        \
  X(int, dist_allgather_params,                                                                  \
    (umad_dist* d, umad_model* m, int64_t bucket_bytes, int64_t* bytes, char* err,               \
     size_t errlen), (d, m, bucket_bytes, bytes, err, errlen))                                   \
  /* The sharded moments, whole, into host memory on root, where reads of UMAD_EXP_AVG(_SQ)     \
   * see them until the next dist_shard_optimizer (a checkpoint). */                             \
  X(int, dist_gather_optimizer, (umad_dist* d, umad_model* m, int32_t root, char* err,           \
    size_t errlen), (d, m, root, err, errlen))                                                   \
  /* ZeRO stage 2, on a model sharded by dist_shard_optimizer: from now on its training passes   \
   * sum the gradients over the ranks as the backward completes them (buckets of about           \
   * bucket_bytes), and each rank keeps its part of the sums for the optimizer step. */          \
  X(int, dist_shard_gradients, (umad_dist* d, umad_model* m, int64_t bucket_bytes, char* err,    \
    size_t errlen), (d, m, bucket_bytes, err, errlen))                                           \
  /* A training pass without data on a stage 2 model: zeros into the pass's gradient sums, so    \
   * that a rank with fewer passes in a mini-batch meets the others' collectives. */             \
  X(int, dist_zero_pass, (umad_dist* d, umad_model* m, char* err, size_t errlen),                \
    (d, m, err, errlen))                                                                         \
  /* What the collectives inside training passes and stage 2 steps moved so far: the bytes this  \
   * rank handed them and the seconds it waited in them. */                                     \
  X(int, dist_comm_totals, (umad_dist* d, int64_t* bytes, double* seconds, char* err,            \
    size_t errlen), (d, bytes, seconds, err, errlen))                                            \
  /* ZeRO stage 3, on a stage 2 model with gradient checkpointing or a frozen one: keeps this    \
   * rank's part of every parameter and releases the rest; passes gather a layer's parameters    \
   * whole while they use it (all-gathers of about bucket_bytes). Every rank must then run as     \
   * many passes as the others: dist_empty_forward is a forward pass's gathers alone. */          \
  X(int, dist_shard_weights, (umad_dist* d, umad_model* m, int64_t bucket_bytes, char* err,      \
    size_t errlen), (d, m, bucket_bytes, err, errlen))                                           \
  X(int, dist_empty_forward, (umad_dist* d, umad_model* m, char* err, size_t errlen),            \
    (d, m, err, errlen))                                                                         \
  /* Gathers a stage 3 model's parameters whole (every rank at once), for reads, until as many    \
   * dist_release_weights (local); no-ops on other models. */                                      \
  X(int, dist_hold_weights, (umad_dist* d, umad_model* m, char* err, size_t errlen),             \
    (d, m, err, errlen))                                                                         \
  X(int, dist_release_weights, (umad_dist* d, umad_model* m, char* err, size_t errlen),          \
    (d, m, err, errlen))                                                                         \
  /* Copies root's n bytes at data into every rank's data. */                                    \
  X(int, dist_broadcast_bytes, (umad_dist* d, void* data, int64_t n, int32_t root, char* err,    \
    size_t errlen), (d, data, n, root, err, errlen))

#define UMAD_TORCH_DECLARE(ret, name, params, args) ret umad_##name params;
#define UMAD_TORCH_DECLARE_VOID(name, params, args) void umad_##name params;
UMAD_TORCH_API(UMAD_TORCH_DECLARE, UMAD_TORCH_DECLARE_VOID)
#undef UMAD_TORCH_DECLARE
#undef UMAD_TORCH_DECLARE_VOID

#ifdef __cplusplus
}
#endif
#endif
