#include "plugin.h"

#include <dlfcn.h>
#include <stdio.h>

// One table per process: the plugin is loaded once and never unloaded (libtorch does not
// survive dlclose).
static struct {
  __typeof__(&umad_abi_version) abi_version;
  __typeof__(&umad_torch_version) torch_version;
  __typeof__(&umad_set_threads) set_threads;
  __typeof__(&umad_cuda_available) cuda_available;
  __typeof__(&umad_model_create) model_create;
  __typeof__(&umad_model_free) model_free;
  __typeof__(&umad_model_set_tensor) model_set_tensor;
  __typeof__(&umad_model_finalize) model_finalize;
  __typeof__(&umad_model_clone) model_clone;
  __typeof__(&umad_model_tensor_count) model_tensor_count;
  __typeof__(&umad_model_tensor_info) model_tensor_info;
  __typeof__(&umad_model_read) model_read;
  __typeof__(&umad_model_write) model_write;
  __typeof__(&umad_optim_get) optim_get;
  __typeof__(&umad_optim_set) optim_set;
  __typeof__(&umad_logprobs) logprobs;
  __typeof__(&umad_policy_loss) policy_loss;
  __typeof__(&umad_sft_loss) sft_loss;
  __typeof__(&umad_kl) kl;
  __typeof__(&umad_optim_step) optim_step;
  __typeof__(&umad_zero_grad) zero_grad;
} api;

int plugin_preload_global(const char* path, char* err, size_t errlen) {
  if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    return 1;
  }
  return 0;
}

int plugin_load(const char* path, char* err, size_t errlen) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    return 1;
  }
#define SYM(field, name)                                                   \
  do {                                                                     \
    *(void**)(&api.field) = dlsym(h, name);                                \
    if (api.field == NULL) {                                               \
      snprintf(err, errlen, "%s lacks symbol %s: rebuild it", path, name); \
      return 1;                                                            \
    }                                                                      \
  } while (0)
  // The version first: an old plugin may lack newer symbols, and the version names that.
  SYM(abi_version, "umad_abi_version");
  if (api.abi_version() != UMAD_TORCH_ABI_VERSION) return 2;
  SYM(torch_version, "umad_torch_version");
  SYM(set_threads, "umad_set_threads");
  SYM(cuda_available, "umad_cuda_available");
  SYM(model_create, "umad_model_create");
  SYM(model_free, "umad_model_free");
  SYM(model_set_tensor, "umad_model_set_tensor");
  SYM(model_finalize, "umad_model_finalize");
  SYM(model_clone, "umad_model_clone");
  SYM(model_tensor_count, "umad_model_tensor_count");
  SYM(model_tensor_info, "umad_model_tensor_info");
  SYM(model_read, "umad_model_read");
  SYM(model_write, "umad_model_write");
  SYM(optim_get, "umad_optim_get");
  SYM(optim_set, "umad_optim_set");
  SYM(logprobs, "umad_logprobs");
  SYM(policy_loss, "umad_policy_loss");
  SYM(sft_loss, "umad_sft_loss");
  SYM(kl, "umad_kl");
  SYM(optim_step, "umad_optim_step");
  SYM(zero_grad, "umad_zero_grad");
#undef SYM
  return 0;
}

int plugin_abi_version(void) { return api.abi_version(); }
const char* plugin_torch_version(void) { return api.torch_version(); }
int plugin_set_threads(int32_t n, char* err, size_t errlen) { return api.set_threads(n, err, errlen); }
int plugin_cuda_available(void) { return api.cuda_available(); }

umad_model* plugin_model_create(const umad_model_config* cfg, char* err, size_t errlen) {
  return api.model_create(cfg, err, errlen);
}
void plugin_model_free(umad_model* m) { api.model_free(m); }
int plugin_model_set_tensor(umad_model* m, const char* name, int32_t dtype, const int64_t* shape,
                            int32_t ndim, const void* data, char* err, size_t errlen) {
  return api.model_set_tensor(m, name, dtype, shape, ndim, data, err, errlen);
}
int plugin_model_finalize(umad_model* m, char* err, size_t errlen) {
  return api.model_finalize(m, err, errlen);
}
umad_model* plugin_model_clone(const umad_model* m, int32_t dtype, int32_t trainable, char* err,
                               size_t errlen) {
  return api.model_clone(m, dtype, trainable, err, errlen);
}
int plugin_model_tensor_count(const umad_model* m) { return api.model_tensor_count(m); }
int plugin_model_tensor_info(const umad_model* m, int32_t i, char* name, size_t namelen,
                             int64_t* shape, int32_t* ndim) {
  return api.model_tensor_info(m, i, name, namelen, shape, ndim);
}
int plugin_model_read(const umad_model* m, const char* name, int32_t what, int32_t dtype, void* dst,
                      int64_t nbytes, char* err, size_t errlen) {
  return api.model_read(m, name, what, dtype, dst, nbytes, err, errlen);
}
int plugin_model_write(umad_model* m, const char* name, int32_t what, int32_t dtype,
                       const void* src, int64_t nbytes, char* err, size_t errlen) {
  return api.model_write(m, name, what, dtype, src, nbytes, err, errlen);
}
int plugin_optim_get(const umad_model* m, int64_t* step, int64_t* skipped_total) {
  return api.optim_get(m, step, skipped_total);
}
int plugin_optim_set(umad_model* m, int64_t step, int64_t skipped_total) {
  return api.optim_set(m, step, skipped_total);
}
int plugin_logprobs(umad_model* m, int32_t n_seqs, const int32_t* tokens, const int32_t* prompt_lens,
                    const int32_t* resp_lens, double temperature, int64_t chunk, float* logp,
                    float* entropy, char* err, size_t errlen) {
  umad_seqs s = {n_seqs, tokens, prompt_lens, resp_lens};
  return api.logprobs(m, &s, temperature, chunk, logp, entropy, err, errlen);
}
int plugin_policy_loss(umad_model* m, int32_t n_seqs, const int32_t* tokens,
                       const int32_t* prompt_lens, const int32_t* resp_lens, const float* old_logp,
                       const float* advantage, const float* ref_logp, const float* is_weight,
                       const float* mask, const umad_loss_config* cfg, int32_t backward,
                       double scale, umad_loss_stats* stats, float* logp_out, char* err,
                       size_t errlen) {
  umad_seqs s = {n_seqs, tokens, prompt_lens, resp_lens};
  umad_token_inputs in = {old_logp, advantage, ref_logp, is_weight, mask};
  return api.policy_loss(m, &s, &in, cfg, backward, scale, stats, logp_out, err, errlen);
}
int plugin_sft_loss(umad_model* m, int32_t n_seqs, const int32_t* tokens, const int32_t* prompt_lens,
                    const int32_t* resp_lens, int64_t chunk, int32_t backward, double scale,
                    double* loss, char* err, size_t errlen) {
  umad_seqs s = {n_seqs, tokens, prompt_lens, resp_lens};
  return api.sft_loss(m, &s, chunk, backward, scale, loss, err, errlen);
}
int plugin_kl(const float* logp, const float* ref_logp, int64_t n, int32_t estimator, float* out,
              char* err, size_t errlen) {
  return api.kl(logp, ref_logp, n, estimator, out, err, errlen);
}
int plugin_optim_step(umad_model* m, const umad_adamw* opt, umad_step_stats* stats, char* err,
                      size_t errlen) {
  return api.optim_step(m, opt, stats, err, errlen);
}
int plugin_zero_grad(umad_model* m) { return api.zero_grad(m); }
