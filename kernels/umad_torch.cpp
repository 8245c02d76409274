// libumad_torch: decoder-only transformers (Qwen2/Qwen2.5, Qwen3, Llama 3, Gemma 3) with
// Hugging Face semantics, the policy and SFT losses and the optimizer step behind the C ABI
// of umad_torch.h. This file holds the entry points of the runtime (versions, threads,
// devices, caches) and of a model's life and tensors; the model itself is umad_model.h's
// (construction in umad_model.cpp, the forward in umad_forward.cpp, ZeRO in umad_zero.cpp),
// the passes and the step are umad_passes.cpp's and umad_step.cpp's. The lm_head's chunked
// log-probs (umad_logprobs.cpp), the table of policy losses (umad_losses.cpp), AdamW's
// arithmetic (umad_optim.cpp), the collectives (umad_dist.cpp) and the CPU allocator
// (umad_alloc.cpp) are translation units of their own: compiles against torch are slow, and
// a change to one of them does not recompile the others.

#include "umad_model.h"

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
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace umad;

namespace {

std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); i++) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
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

UMAD_EXPORT int umad_bench_op(int32_t op, int32_t device, int32_t index, int32_t dtype, int64_t m,
                              int64_t k, int64_t n, int32_t iters, double* seconds, char* err,
                              size_t errlen) {
  return guarded(err, errlen, [&] {
    if (n < 1 || iters < 1) throw ArgError("bench_op: n and iters must be at least 1");
    if (op == UMAD_BENCH_MATMUL && (m < 1 || k < 1)) throw ArgError("bench_op: m and k must be at least 1");
    if (seconds == nullptr) throw ArgError("bench_op: NULL seconds");
    const torch::Device dev = device_of(device, index);
    cuda_used = cuda_used || dev.is_cuda();
    torch::NoGradGuard no_grad;
    const auto opts = torch::dtype(to_dtype(dtype)).device(dev);
    Tensor a, b, out;
    if (op == UMAD_BENCH_MATMUL) {
      a = torch::randn({m, k}, opts), b = torch::randn({k, n}, opts), out = torch::empty({m, n}, opts);
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

namespace umad {

int guard(char* err, size_t errlen, const std::function<void()>& f) {
  return guarded(err, errlen, f);
}

}  // namespace umad
