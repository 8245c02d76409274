// Frees a llama_context with its scheduler first.
//
// The pinned ggml's ggml_backend_sched_free (an ollama patch) calls each backend's reset
// hook. llama_context declares its scheduler before its backends, so its destructor frees
// the backends first and the scheduler then reads them after they are gone: on the CPU a
// silent use-after-free (valgrind shows the read), with CUDA a call through freed memory
// that crashed every context close in ggml_backend_cuda_reset (seen on an H200). Freeing
// the scheduler while the backends still live keeps the order right.

#include "llama-context.h"

namespace {

// llama_context::sched is private. An explicit instantiation may name a private member
// (access checks do not apply to its template arguments), and the friend it defines hands
// the member pointer out. This stops compiling if the member is renamed or retyped.
using sched_member = ggml_backend_sched_ptr llama_context::*;
sched_member sched_of();
template <sched_member M>
struct expose {
	friend sched_member sched_of() { return M; }
};
template struct expose<&llama_context::sched>;

}  // namespace

extern "C" void umad_llama_free(struct llama_context *ctx) {
	if (ctx == nullptr) {
		return;
	}
	(ctx->*sched_of()).reset();
	llama_free(ctx);
}
