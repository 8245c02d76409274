// Function-pointer table over libumad_torch, filled by dlopen/dlsym. The wrappers build the
// ABI's structs on the C stack so no Go memory ever holds a pointer handed to C.
#ifndef UMAD_CGO_PLUGIN_H
#define UMAD_CGO_PLUGIN_H
#include <stddef.h>
#include <stdint.h>
#include "umad_torch.h"

int plugin_preload_global(const char* path, char* err, size_t errlen);
int plugin_load(const char* path, char* err, size_t errlen);
int plugin_abi_version(void);
const char* plugin_torch_version(void);
int plugin_set_threads(int32_t n, char* err, size_t errlen);
int plugin_cuda_available(void);

umad_model* plugin_model_create(const umad_model_config* cfg, char* err, size_t errlen);
void plugin_model_free(umad_model* m);
int plugin_model_set_tensor(umad_model* m, const char* name, int32_t dtype, const int64_t* shape,
                            int32_t ndim, const void* data, char* err, size_t errlen);
int plugin_model_finalize(umad_model* m, char* err, size_t errlen);
umad_model* plugin_model_clone(const umad_model* m, int32_t dtype, int32_t trainable, char* err,
                               size_t errlen);
int plugin_model_tensor_count(const umad_model* m);
int plugin_model_tensor_info(const umad_model* m, int32_t i, char* name, size_t namelen,
                             int64_t* shape, int32_t* ndim);
int plugin_model_read(const umad_model* m, const char* name, int32_t what, int32_t dtype, void* dst,
                      int64_t nbytes, char* err, size_t errlen);
int plugin_model_write(umad_model* m, const char* name, int32_t what, int32_t dtype,
                       const void* src, int64_t nbytes, char* err, size_t errlen);
int plugin_optim_get(const umad_model* m, int64_t* step, int64_t* skipped_total);
int plugin_optim_set(umad_model* m, int64_t step, int64_t skipped_total);
int plugin_logprobs(umad_model* m, int32_t n_seqs, const int32_t* tokens, const int32_t* prompt_lens,
                    const int32_t* resp_lens, double temperature, int64_t chunk, float* logp,
                    float* entropy, char* err, size_t errlen);
int plugin_policy_loss(umad_model* m, int32_t n_seqs, const int32_t* tokens,
                       const int32_t* prompt_lens, const int32_t* resp_lens, const float* old_logp,
                       const float* advantage, const float* ref_logp, const float* is_weight,
                       const float* mask, const umad_loss_config* cfg, int32_t backward,
                       double scale, umad_loss_stats* stats, float* logp_out, char* err,
                       size_t errlen);
int plugin_sft_loss(umad_model* m, int32_t n_seqs, const int32_t* tokens, const int32_t* prompt_lens,
                    const int32_t* resp_lens, int64_t chunk, int32_t backward, double scale,
                    double* loss, char* err, size_t errlen);
int plugin_kl(const float* logp, const float* ref_logp, int64_t n, int32_t estimator, float* out,
              char* err, size_t errlen);
int plugin_optim_step(umad_model* m, const umad_adamw* opt, umad_step_stats* stats, char* err,
                      size_t errlen);
int plugin_zero_grad(umad_model* m);
#endif
