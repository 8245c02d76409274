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

// install_cpu_allocator makes libtorch's CPU tensors allocate through the plugin's caching
// allocator (kernels/umad_alloc.cpp); empty_cpu_cache frees the blocks it keeps.
void install_cpu_allocator();
void empty_cpu_cache();

}  // namespace umad

#endif
