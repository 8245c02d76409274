// What the plugin's translation units share; not part of the C ABI (hidden symbols).
#ifndef UMAD_INTERNAL_H
#define UMAD_INTERNAL_H

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "umad_torch.h"

// UMAD_EXPORT marks an entry point of the C ABI, the plugin's only visible symbols.
#define UMAD_EXPORT extern "C" __attribute__((visibility("default")))

namespace umad {

// ArgError is a caller mistake (bad shape, name, range); anything else from torch is a
// torch error. Both become codes at the ABI.
struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// guard runs f and turns every exception into a code and a message in (err, errlen), as
// every entry point of the C ABI does.
int guard(char* err, size_t errlen, const std::function<void()>& f);

// CallTrace records the entry point it lives in with libtorch's profiler while
// UMAD_TORCH_PROFILE names a directory (umad_profile.cpp); otherwise it does nothing.
class CallTrace {
 public:
  explicit CallTrace(const char* name);
  ~CallTrace();
  CallTrace(const CallTrace&) = delete;
  CallTrace& operator=(const CallTrace&) = delete;

 private:
  struct Recording;
  std::unique_ptr<Recording> recording_;
};

// parameters returns a ready model's parameter tensors in checkpoint order (handles that
// share the model's storage and autograd state); it throws for a NULL or unfinished model.
std::vector<at::Tensor> parameters(umad_model* m);

// optimizer_state returns a trainable model's AdamW moments (exp_avg and exp_avg_sq of each
// trained parameter in checkpoint order): none for a frozen model, a LoRA model's adapters'.
std::vector<at::Tensor> optimizer_state(umad_model* m);

// chunked_logprobs returns the log-probs of targets and the entropies under
// softmax(h w^T * inv_temp), row chunk by row chunk (kernels/umad_logprobs.cpp); with keep,
// a training pass keeps the chunks' log-softmax for its backward instead of recomputing.
std::vector<at::Tensor> chunked_logprobs(const at::Tensor& h, const at::Tensor& w, const at::Tensor& targets,
                                         double inv_temp, int64_t chunk, bool keep);

// sum_of_squares is a gradient's sum of squares in float64; adamw_update applies one AdamW
// step (torch.optim.AdamW's arithmetic, the gradient scaled by coef first, the moments'
// bias corrections bc1 and bc2) to a parameter and its moments (kernels/umad_optim.cpp).
// kNormBlock is the length of the blocks sum_of_squares squares in float (stage 2's sharded
// norm squares the same blocks of its parts).
constexpr int64_t kNormBlock = 1024;
at::Tensor sum_of_squares(const at::Tensor& g);
void adamw_update(const at::Tensor& p, const at::Tensor& g, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
                  const umad_adamw& opt, double coef, double bc1, double bc2);
// adamw_offloaded is adamw_update with the moments in host memory (--offload optimizer):
// the weights and gradient go to them a chunk of kOffloadChunk at a time, the CPU updates
// the chunk as adamw_update would, and the weights come back.
void adamw_offloaded(const at::Tensor& p, const at::Tensor& g, const at::Tensor& exp_avg,
                     const at::Tensor& exp_avg_sq, const umad_adamw& opt, double coef, double bc1, double bc2);

// kAdamSlice is the length of the slices adamw_update takes a CPU tensor in; a shard of the
// optimizer starts a tensor's part at a multiple of it, so each rank updates exactly the
// slices one process would, and the weights come out bit-identical.
constexpr int64_t kAdamSlice = int64_t(1) << 18;

// kOffloadChunk is how many values of a parameter an offloaded AdamW step moves to the host
// and back at a time: a multiple of kAdamSlice, so the CPU update slices as it would in place.
constexpr int64_t kOffloadChunk = 64 * kAdamSlice;

// ZeRO stage 1 (kernels/umad_dist.cpp): the trained elements (every trained parameter,
// flattened, in checkpoint order) are cut into world contiguous parts; rank r keeps the
// AdamW moments of part r and updates that part. shard_bounds are the world + 1 offsets of
// the parts of tensors of those sizes, cut at a tensor's edge or a multiple of kAdamSlice
// into it (kernels/umad_optim.cpp).
std::vector<int64_t> shard_bounds(const std::vector<int64_t>& sizes, int world);

// trained returns the trained parameters in checkpoint order, flattened views.
std::vector<at::Tensor> trained(umad_model* m);

// shard_optimizer keeps this rank's part of whole moments, or keeps the part it has and
// drops the gathered copy of set_gathered; shard_world is 1 for an unsharded model.
void shard_optimizer(umad_model* m, int rank, int world);
int shard_world(umad_model* m);

// shard_moments returns this rank's part of exp_avg or exp_avg_sq (UMAD_EXP_AVG...), flat
// pieces in trained order that together are the elements [bounds[rank], bounds[rank+1]).
std::vector<at::Tensor> shard_moments(umad_model* m, int32_t what);

// set_gathered hands a sharded model whole moments of the trained parameters (trained
// order), which reads of the optimizer state see until shard_optimizer drops them.
void set_gathered(umad_model* m, const std::vector<at::Tensor>& avg, const std::vector<at::Tensor>& avg_sq);

// ZeRO stage 2: a model whose optimizer state is sharded also sums its gradients over the
// ranks as the backward completes them (a layer at a time under activation checkpointing,
// else at the end of each pass), keeping its part of the sums only. GradComm is the
// collectives that takes, called from inside the backward (kernels/umad_dist.cpp).
struct GradComm {
  virtual ~GradComm() = default;
  // sum starts summing tensors of one dtype over the ranks, in place; the function it
  // returns waits for the sums (until then the tensors must live and stay untouched), so
  // that they run behind the caller's next work.
  virtual std::function<void()> sum(const std::vector<at::Tensor>& ts) = 0;
  // max reduces a small tensor in place with MAX.
  virtual void max(at::Tensor& t) = 0;
  // gather returns every rank's 1-d tensor (their lengths may differ), in rank order.
  virtual std::vector<at::Tensor> gather(const at::Tensor& t) = 0;
  // gather_range gives every rank the bytes [lo, hi) of a byte vector cut between the ranks
  // at bounds (world + 1 offsets): mine are this rank's part, flat pieces laid end to end
  // from bounds[rank]; dst receive [lo, hi), flat pieces laid end to end from lo.
  virtual void gather_range(const std::vector<at::Tensor>& mine, const std::vector<at::Tensor>& dst,
                            const std::vector<int64_t>& bounds, int64_t lo, int64_t hi) = 0;
};
// shard_gradients makes a model with sharded moments sum its gradients through comm;
// zero_pass runs the sums of a training pass with zeros, for a rank that has fewer passes
// in a mini-batch than another (every rank must meet every collective).
void shard_gradients(umad_model* m, std::shared_ptr<GradComm> comm);
void zero_pass(umad_model* m);
// ZeRO stage 3: shard_weights keeps this rank's part of every parameter (cut as the
// moments are) and releases the rest; a pass gathers a layer's parameters whole while it
// uses them (and the embedding, final norm and head for the whole pass). A trainable model
// must be at stage 2 and checkpointed; a frozen one (a reference) needs neither.
// empty_forward runs a forward pass's gathers alone, for a rank with fewer passes;
// hold_weights gathers every parameter whole until release_held_weights (reads).
void shard_weights(umad_model* m, std::shared_ptr<GradComm> comm, int rank, int world);
void empty_forward(umad_model* m);
void hold_weights(umad_model* m);
void release_held_weights(umad_model* m);
// masked_mean is the mean of x over the tokens where the 0/1 mask is 1.
at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask);

// PolicyTokens are what a policy loss reads, one entry per response token of the
// micro-batch: the current log-probs (with their graph), log(pi/pi_old) clamped to [-20, 20],
// the advantages, the 0/1 loss mask, and each token's sequence (seg, n_seqs sequences).
struct PolicyTokens {
  at::Tensor logp, log_ratio, adv, mask, seg;
  int64_t n_seqs;
};

// PolicyTerms are a policy loss's per-token loss, before the importance weights and the
// aggregation, and the masked fractions of tokens its clip moved (clipfrac) and its dual
// clip bounded (clipfrac_lower).
struct PolicyTerms {
  at::Tensor per_token, clipfrac, clipfrac_lower;
};

// A PolicyLoss computes its terms; it throws ArgError for settings it cannot honour.
using PolicyLoss = PolicyTerms (*)(const umad_policy_params& p, const PolicyTokens& t);

// find_policy_loss returns the loss of that name from the table of kernels/umad_losses.cpp,
// or throws ArgError naming the ones there are.
PolicyLoss find_policy_loss(const char* name);

// install_cpu_allocator makes libtorch's CPU tensors allocate through the plugin's caching
// allocator (kernels/umad_alloc.cpp); empty_cpu_cache frees the blocks it keeps.
void install_cpu_allocator();
void empty_cpu_cache();

}  // namespace umad

#endif
