// What the plugin's translation units share; not part of the C ABI (hidden symbols).
#ifndef UMAD_INTERNAL_H
#define UMAD_INTERNAL_H

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "umad_torch.h"

namespace umad {

// guard runs f and turns every exception into a code and a message in (err, errlen), as
// every entry point of the C ABI does.
int guard(char* err, size_t errlen, const std::function<void()>& f);

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
at::Tensor sum_of_squares(const at::Tensor& g);
void adamw_update(const at::Tensor& p, const at::Tensor& g, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
                  const umad_adamw& opt, double coef, double bc1, double bc2);

// install_cpu_allocator makes libtorch's CPU tensors allocate through the plugin's caching
// allocator (kernels/umad_alloc.cpp); empty_cpu_cache frees the blocks it keeps.
void install_cpu_allocator();
void empty_cpu_cache();

}  // namespace umad

#endif
