// The process group of a multi-process run, over libtorch's c10d: the ranks meet through a
// FileStore when all run on one machine (no network listener), else through a TCPStore that
// rank 0 hosts; the collectives run on ProcessGroupGloo (CPU tensors) or, where
// the libtorch was built with it, ProcessGroupNCCL (CUDA tensors). libtorch's C++ API has
// no DDP module, so this file has what data parallelism needs: weights broadcast, bucketed
// gradient all-reduce, small reductions and an all-gather of byte strings; ZeRO's
// collectives are umad_dist_zero.cpp's. They are translation units of their own so that
// changing them does not recompile the model.

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// pip's PyTorch wheels (2.11 at least) ship c10d's headers but not gloo's, which
// ProcessGroupGloo.hpp includes: such a plugin has NCCL only.
#if __has_include(<gloo/algorithm.h>)
#define UMAD_HAS_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#else
#define UMAD_HAS_GLOO 0
#endif
#include <torch/version.h>
#if defined(UMAD_TORCH_CUDA)  // a CUDA libtorch (CMakeLists.txt): its c10d has NCCL
#define USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "umad_dist.h"

using namespace umad;

namespace {

[[maybe_unused]] bool loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// A master address file://PATH (torch.distributed's init_method spelling) is a FileStore at
// PATH: every rank runs on this machine.
const std::string kFileStore = "file://";

bool file_store(const std::string& host) { return host.rfind(kFileStore, 0) == 0; }

#if UMAD_HAS_GLOO
// gloo_device binds where the peers can reach this rank: GLOO_SOCKET_IFNAME's interface
// when set (as torch.distributed does), the loopback for a one-machine job, else the
// address this machine's hostname resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (loopback(master) || file_store(master)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

// connect makes d's collectives over d.store, as rank d.rank of d.world.
void connect(Dist& d) {
  if (d.backend == UMAD_BACKEND_GLOO) {
#if UMAD_HAS_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(d.timeout);
    opts->devices.push_back(gloo_device(d.master));
    d.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(d.store, d.rank, d.world, opts);
#endif
  } else if (d.backend == UMAD_BACKEND_NCCL) {
#if defined(UMAD_TORCH_CUDA)
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = d.timeout;
    d.pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(d.store, d.rank, d.world, opts);
    d.device = torch::Device(torch::kCUDA, 0);
#else
    throw std::invalid_argument("this libtorch has no NCCL (a CPU build); use the gloo backend");
#endif
  } else {
    throw std::invalid_argument("unknown backend code " + std::to_string(d.backend));
  }
}

}  // namespace

namespace umad {

Bucket next_bucket(const std::vector<torch::Tensor>& ts, size_t i, int64_t bucket_bytes, const torch::Device& dev) {
  Bucket b{i, i, {}, false};
  int64_t bytes = 0;
  while (b.j < ts.size() && (b.j == i || bytes + int64_t(ts[b.j].nbytes()) <= bucket_bytes)) bytes += ts[b.j++].nbytes();
  if (b.j == i + 1 && ts[i].is_contiguous() && ts[i].device() == dev) {
    b.buf = ts[i].view({-1});
    b.in_place = true;
    return b;
  }
  std::vector<torch::Tensor> flat;
  for (size_t k = i; k < b.j; k++) flat.push_back(ts[k].reshape({-1}));
  b.buf = torch::cat(flat).to(dev).contiguous();
  return b;
}

void unpack(const Bucket& b, const std::vector<torch::Tensor>& ts) {
  if (b.in_place) return;
  auto back = b.buf.to(ts[b.i].device());
  int64_t off = 0;
  for (size_t k = b.i; k < b.j; k++) {
    auto n = ts[k].numel();
    ts[k].copy_(back.narrow(0, off, n).view_as(ts[k]));
    off += n;
  }
}

std::vector<torch::Tensor> allgather_padded(const Dist& d, const torch::Tensor& t, int64_t* sent) {
  auto len = torch::full({1}, t.numel(), torch::dtype(torch::kInt64).device(d.device));
  std::vector<torch::Tensor> lin{len};
  std::vector<std::vector<torch::Tensor>> lout(1);
  for (int r = 0; r < d.world; r++) lout[0].push_back(torch::empty_like(len));
  run(d.pg->allgather(lout, lin));
  std::vector<int64_t> lens;
  int64_t longest = 0;
  for (auto& l : lout[0]) longest = std::max(longest, lens.emplace_back(l.item<int64_t>()));
  std::vector<torch::Tensor> parts;
  if (longest == 0) {
    for (int r = 0; r < d.world; r++) parts.push_back(t.new_empty({0}));
    return parts;
  }
  auto mine = torch::zeros({longest}, t.options().device(d.device));
  mine.narrow(0, 0, t.numel()).copy_(t);
  std::vector<torch::Tensor> in{mine};
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < d.world; r++) out[0].push_back(torch::empty_like(mine));
  run(d.pg->allgather(out, in));
  *sent += len.nbytes() + mine.nbytes();
  for (int r = 0; r < d.world; r++) parts.push_back(out[0][size_t(r)].narrow(0, 0, lens[size_t(r)]).to(t.device()));
  return parts;
}

}  // namespace umad

struct umad_dist {};  // opaque to C; the pointer is a Dist*

UMAD_EXPORT umad_dist* umad_dist_init(const char* host, int32_t port, int32_t rank, int32_t world,
                                      int32_t backend, double timeout_s, char* err, size_t errlen) {
  Dist* out = nullptr;
  umad::guard(err, errlen, [&] {
    if (host == nullptr || *host == 0) throw std::invalid_argument("no master address");
    const std::string master(host);
    if (!file_store(master) && (port < 1 || port > 65535)) throw std::invalid_argument("master port must be in 1..65535");
    if (world < 1 || rank < 0 || rank >= world)
      throw std::invalid_argument("rank " + std::to_string(rank) + " outside world size " +
                                  std::to_string(world));
    if (!(timeout_s > 0)) throw std::invalid_argument("timeout must be positive");
#if !UMAD_HAS_GLOO
    // Before the store: its rank 0 would wait for peers that are about to fail the same way.
    if (backend == UMAD_BACKEND_GLOO)
      throw std::invalid_argument(
          "this plugin was built without gloo's headers (pip's PyTorch ships none), so its ranks cannot "
          "meet on the CPU: train on GPUs (NCCL), or build the plugin against a libtorch with them "
          "(Debian's libtorch-dev and libgloo-dev)");
#endif
    auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
    auto d = std::make_unique<Dist>();
    d->rank = rank;
    d->world = world;
    if (file_store(master)) {
      d->store = c10::make_intrusive<c10d::FileStore>(master.substr(kFileStore.size()), world);
      d->store->setTimeout(timeout);
    } else {
      // libtorch 1.13's TCPStore listens on every interface (README "Several processes").
      c10d::TCPStoreOptions so;
      so.port = uint16_t(port);
      so.isServer = rank == 0;
      so.numWorkers = size_t(world);
      so.waitWorkers = true;
      so.timeout = timeout;
#if UMAD_TCPSTORE_HAS_LIBUV
      so.useLibUV = false;
#endif
      d->store = c10::make_intrusive<c10d::TCPStore>(master, so);
    }
    d->backend = backend;
    d->timeout = timeout;
    d->master = master;
    connect(*d);
    out = d.release();
  });
  return reinterpret_cast<umad_dist*>(out);
}

UMAD_EXPORT void umad_dist_free(umad_dist* d) {
  try {
    delete reinterpret_cast<Dist*>(d);
  } catch (...) {
  }
}

UMAD_EXPORT umad_dist* umad_dist_subgroup(umad_dist* dp, const char* name, const int32_t* ranks, int32_t n,
                                          char* err, size_t errlen) {
  Dist* out = nullptr;
  umad::guard(err, errlen, [&] {
    auto p = checked(dp);
    if (name == nullptr || *name == 0 || n < 1 || ranks == nullptr) throw std::invalid_argument("subgroup: no name or no ranks");
    auto d = std::make_unique<Dist>();
    d->rank = -1;
    for (int32_t i = 0; i < n; i++) {
      if (ranks[i] < 0 || ranks[i] >= p->world || (i > 0 && ranks[i] <= ranks[i - 1]))
        throw std::invalid_argument("subgroup " + std::string(name) + ": ranks must be increasing, within the world of " +
                                    std::to_string(p->world));
      if (ranks[i] == p->rank) d->rank = i;
    }
    if (d->rank < 0) throw std::invalid_argument("subgroup " + std::string(name) + ": this rank is not one of its ranks");
    d->world = n;
    d->backend = p->backend;
    d->timeout = p->timeout;
    d->master = p->master;
    // Its own keys in the job's store: torch.distributed.new_group's way.
    d->store = c10::make_intrusive<c10d::PrefixStore>("umad/subgroup/" + std::string(name), p->store);
    connect(*d);
    out = d.release();
  });
  return reinterpret_cast<umad_dist*>(out);
}

UMAD_EXPORT int umad_dist_agree(umad_dist* dp, const char* key, const void* data, int64_t n,
                                char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (key == nullptr || n < 0 || (n > 0 && data == nullptr))
      throw std::invalid_argument("agree: NULL key or data");
    auto p = static_cast<const uint8_t*>(data);
    std::vector<uint8_t> mine(p, p + n);
    std::string prefix = std::string("umad/agree/") + key + "/";
    d->store->set(prefix + std::to_string(d->rank), mine);
    auto first = d->store->get(prefix + "0");
    for (int r = 1; r < d->world; r++) {
      if (d->store->get(prefix + std::to_string(r)) != first)
        throw std::runtime_error("rank " + std::to_string(r) + "'s " + key + " differs from rank 0's");
    }
  });
}

UMAD_EXPORT int umad_dist_broadcast_model(umad_dist* dp, umad_model* m, int32_t root, char* err,
                                            size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (root < 0 || root >= d->world) throw std::invalid_argument("broadcast root outside the world");
    torch::NoGradGuard no_grad;
    // As bytes: one bucket dtype for weights of any type (a LoRA model's base may be bf16,
    // which Gloo does not move), and a broadcast copies bits anyway.
    std::vector<torch::Tensor> ws;
    auto bytes = [](const torch::Tensor& t) { return t.detach().reshape({-1}).view(torch::kUInt8); };
    for (auto& p : umad::parameters(m)) ws.push_back(bytes(p));
    if (umad::shard_world(m) == 1)  // sharded moments: each rank read its part of the checkpoint
      for (auto& s : umad::optimizer_state(m)) ws.push_back(bytes(s));
    c10d::BroadcastOptions o;
    o.rootRank = root;
    bucketed(ws, int64_t(64) << 20, d->device, [&](torch::Tensor& buf) {
      std::vector<torch::Tensor> v{buf};
      run(d->pg->broadcast(v, o));
    });
  });
}

UMAD_EXPORT int umad_dist_allreduce_grads(umad_dist* dp, umad_model* m, int64_t bucket_bytes,
                                          int64_t* bytes, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (bucket_bytes < 1) throw std::invalid_argument("bucket size must be positive");
    torch::NoGradGuard no_grad;
    auto params = umad::parameters(m);
    // Which tensors have a gradient on some rank: those are reduced, a rank without one
    // contributing zeros, so every rank ends with the same set (the optimizer skips the rest).
    auto has = torch::zeros({int64_t(params.size())}, torch::kFloat32);
    for (size_t i = 0; i < params.size(); i++)
      if (params[i].grad().defined()) has[int64_t(i)] = 1;
    auto flags = has.to(d->device);
    std::vector<torch::Tensor> fv{flags};
    c10d::AllreduceOptions mx;
    mx.reduceOp = c10d::ReduceOp::MAX;
    run(d->pg->allreduce(fv, mx));
    auto any = flags.to(torch::kCPU);
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < params.size(); i++) {
      if (any[int64_t(i)].item<float>() == 0) continue;
      auto& g = params[i].mutable_grad();
      if (!g.defined()) g = torch::zeros_like(params[i]);
      grads.push_back(g);
    }
    int64_t sent = int64_t(flags.nbytes());
    sent += bucketed(grads, bucket_bytes, d->device, [&](torch::Tensor& buf) {
      std::vector<torch::Tensor> v{buf};
      run(d->pg->allreduce(v));
    });
    if (bytes) *bytes = sent;
  });
}

UMAD_EXPORT int umad_dist_allreduce_f64(umad_dist* dp, double* data, int64_t n, int32_t op,
                                        char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (n < 0 || (n > 0 && data == nullptr)) throw std::invalid_argument("allreduce: NULL data");
    if (op != UMAD_REDUCE_SUM && op != UMAD_REDUCE_MAX)
      throw std::invalid_argument("unknown reduce op " + std::to_string(op));
    if (n == 0) return;
    auto t = torch::from_blob(data, {n}, torch::kFloat64).to(d->device, /*non_blocking=*/false,
                                                             /*copy=*/true);
    std::vector<torch::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op == UMAD_REDUCE_MAX ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    run(d->pg->allreduce(v, o));
    auto back = t.to(torch::kCPU).contiguous();
    std::memcpy(data, back.data_ptr(), size_t(n) * sizeof(double));
  });
}

UMAD_EXPORT int umad_dist_allgather(umad_dist* dp, const void* data, int64_t n, int64_t* lens,
                                    void** out, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (n < 0 || (n > 0 && data == nullptr) || !lens || !out)
      throw std::invalid_argument("allgather: NULL argument");
    *out = nullptr;
    auto mine = torch::empty({n}, torch::kUInt8);
    if (n > 0) std::memcpy(mine.data_ptr(), data, size_t(n));
    int64_t sent = 0, total = 0;
    auto parts = allgather_padded(*d, mine, &sent);
    for (int r = 0; r < d->world; r++) total += lens[r] = parts[size_t(r)].numel();
    if (total == 0) return;
    auto buf = static_cast<uint8_t*>(std::malloc(size_t(total)));
    if (buf == nullptr) throw std::runtime_error("allgather: out of memory for " + std::to_string(total) + " bytes");
    int64_t off = 0;
    for (auto& p : parts) {
      auto t = p.contiguous();
      std::memcpy(buf + off, t.data_ptr(), size_t(t.numel()));
      off += t.numel();
    }
    *out = buf;
  });
}

UMAD_EXPORT int umad_dist_barrier(umad_dist* dp, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    run(d->pg->barrier());
  });
}

UMAD_EXPORT int umad_dist_broadcast_bytes(umad_dist* dp, void* data, int64_t n, int32_t root, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (n < 0 || (n > 0 && data == nullptr)) throw std::invalid_argument("broadcast: NULL data");
    if (root < 0 || root >= d->world) throw std::invalid_argument("broadcast root outside the world");
    if (n == 0) return;
    c10d::BroadcastOptions o;
    o.rootRank = root;
    auto t = torch::from_blob(data, {n}, torch::kUInt8);
    bucketed({t}, int64_t(64) << 20, d->device, [&](torch::Tensor& buf) {
      std::vector<torch::Tensor> v{buf};
      run(d->pg->broadcast(v, o));
    });
  });
}
