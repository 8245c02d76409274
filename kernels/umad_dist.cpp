// The process group of a multi-process run, over libtorch's c10d: the ranks meet through a
// FileStore when all run on one machine (no network listener), else through a TCPStore that
// rank 0 hosts; the collectives run on ProcessGroupGloo (CPU tensors) or, where
// the libtorch was built with it, ProcessGroupNCCL (CUDA tensors). libtorch's C++ API has
// no DDP module, so this file has what data parallelism needs: weights broadcast, bucketed
// gradient all-reduce, small reductions and an all-gather of byte strings. It is its own
// translation unit so that changing it does not recompile the model.

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
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

#include "umad_compat.h"
#include "umad_internal.h"
#include "umad_torch.h"

#define UMAD_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

#if UMAD_HAS_C10D_BACKEND
using Group = c10d::Backend;  // 2.x split ProcessGroup into a dispatcher and backends
#else
using Group = c10d::ProcessGroup;
#endif

// Totals count what the collectives called from inside the plugin (stage 2's, in the
// backward and the optimizer step) moved; the Go side times its own calls.
struct Totals {
  int64_t bytes = 0;
  double seconds = 0;
};

struct Dist {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Group> pg;
  int rank = 0, world = 1;
  torch::Device device = torch::kCPU;  // where collective tensors must live
  std::shared_ptr<Totals> totals = std::make_shared<Totals>();
  // How the group was made, for its subgroups.
  int32_t backend = UMAD_BACKEND_GLOO;
  std::chrono::milliseconds timeout{0};
  std::string master;
};

Dist* checked(umad_dist* d) {
  if (d == nullptr) throw std::invalid_argument("NULL process group");
  return reinterpret_cast<Dist*>(d);
}

// run waits for a collective; c10d reports a peer that died or a timeout as an exception.
void run(const c10::intrusive_ptr<c10d::Work>& w) { w->wait(); }

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

// A Bucket is tensors [i, j) of a list in one flat buffer on the collective's device; a
// tensor alone, contiguous and already there, is its own buffer (in place, no copy).
struct Bucket {
  size_t i = 0, j = 0;
  torch::Tensor buf;
  bool in_place = false;
};

// next_bucket packs the tensors from i on, up to about bucket_bytes (one tensor larger than
// that is a bucket of its own). All share one dtype.
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

// unpack copies a bucket's buffer back into its tensors (contiguous: their storage is written).
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

// bucketed applies the in-place collective f to the tensors a bucket at a time and copies
// the results back. It returns the bytes handed to f.
template <typename F>
int64_t bucketed(const std::vector<torch::Tensor>& ts, int64_t bucket_bytes, const torch::Device& dev,
                 F&& f) {
  int64_t sent = 0;
  for (size_t i = 0; i < ts.size();) {
    auto b = next_bucket(ts, i, bucket_bytes, dev);
    f(b.buf);
    sent += b.buf.nbytes();
    unpack(b, ts);
    i = b.j;
  }
  return sent;
}

// A Flat reads and writes tensors laid end to end as one flat vector whose first element
// is at offset start: every trained parameter (start 0), or a rank's part of the moments.
struct Flat {
  std::vector<torch::Tensor> pieces;  // flat
  int64_t start = 0;

  // each calls f(piece, offset into the piece, offset into [lo, lo + n), length) for the
  // pieces that hold elements [lo, lo + n).
  template <typename F>
  void each(int64_t lo, int64_t n, F&& f) const {
    int64_t at = start;
    for (auto& p : pieces) {
      const int64_t a = std::max(lo, at), e = std::min(lo + n, at + p.numel());
      if (a < e) f(p, a - at, a - lo, e - a);
      at += p.numel();
    }
  }
};

// gather_parts sends this rank's part [b[rank], b[rank + 1]) of a flat vector, read from
// mine, to every rank, in rounds of about bucket_bytes with each part padded to one length
// (Gloo gathers equal sizes); with dst, the other ranks' parts are written there. It
// returns the bytes this rank handed to the all-gathers.
int64_t gather_parts(Dist* d, const std::vector<int64_t>& b, const Flat& mine, const Flat* dst,
                     torch::ScalarType dtype, int64_t bucket_bytes) {
  int64_t longest = 0;
  for (int r = 0; r < d->world; r++) longest = std::max(longest, b[size_t(r) + 1] - b[size_t(r)]);
  const int64_t elem = int64_t(c10::elementSize(dtype));
  const int64_t chunk = std::max<int64_t>(1, bucket_bytes / elem / d->world);
  auto part = [&](int r, int64_t off, int64_t c) { return std::clamp<int64_t>(b[size_t(r) + 1] - b[size_t(r)] - off, 0, c); };
  int64_t sent = 0;
  for (int64_t off = 0; off < longest; off += chunk) {
    const int64_t c = std::min(chunk, longest - off), n = part(d->rank, off, c);
    auto send = torch::zeros({c}, torch::dtype(dtype).device(d->device));
    mine.each(b[size_t(d->rank)] + off, n, [&](const torch::Tensor& p, int64_t at, int64_t to, int64_t len) {
      send.narrow(0, to, len).copy_(p.narrow(0, at, len));
    });
    std::vector<torch::Tensor> in{send};
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int r = 0; r < d->world; r++) out[0].push_back(torch::empty({c}, send.options()));
    run(d->pg->allgather(out, in));
    sent += send.nbytes();
    if (dst == nullptr) continue;
    for (int r = 0; r < d->world; r++) {
      if (r == d->rank && dst->pieces.data() == mine.pieces.data()) continue;  // already there
      dst->each(b[size_t(r)] + off, part(r, off, c), [&](const torch::Tensor& p, int64_t at, int64_t from, int64_t len) {
        p.narrow(0, at, len).copy_(out[0][size_t(r)].narrow(0, from, len));
      });
    }
  }
  return sent;
}

// shard_layout is the trained parameters of a model sharded over d's ranks and the bounds
// of the ranks' parts.
std::pair<Flat, std::vector<int64_t>> shard_layout(Dist* d, umad_model* m) {
  if (umad::shard_world(m) != d->world) throw std::invalid_argument("the optimizer state is not sharded over this group");
  Flat params{umad::trained(m), 0};
  std::vector<int64_t> sizes;
  for (auto& t : params.pieces) sizes.push_back(t.numel());
  return {params, umad::shard_bounds(sizes, d->world)};
}

// allgather_padded returns every rank's 1-d tensor t (lengths may differ), in rank order,
// on t's device: the lengths first, then the tensors padded to the longest (Gloo gathers one
// size). It adds the bytes it handed the all-gathers to *sent.
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

// Comm is stage 2's collectives over a process group; it holds the group, so a model that
// keeps it outlives nothing it uses.
struct Comm : umad::GradComm {
  Dist d;  // a copy: the group lives as long as a model that uses it
  int64_t bucket_bytes;

  Comm(const Dist& dist, int64_t bucket) : d(dist), bucket_bytes(bucket) {}

  void gather_range(const std::vector<torch::Tensor>& mine, const std::vector<torch::Tensor>& dst,
                    const std::vector<int64_t>& bounds, int64_t lo, int64_t hi) override {
    timed([&] {
      std::vector<int64_t> b;
      for (auto x : bounds) b.push_back(std::clamp(x, lo, hi));
      Flat from{mine, bounds[size_t(d.rank)]}, to{dst, lo};
      d.totals->bytes += gather_parts(&d, b, from, &to, torch::kUInt8, bucket_bytes);
    });
  }

  template <typename F>
  void timed(F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    d.totals->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  std::function<void()> sum(const std::vector<torch::Tensor>& ts) override {
    auto started = std::make_shared<std::vector<std::pair<Bucket, c10::intrusive_ptr<c10d::Work>>>>();
    timed([&] {
      for (size_t i = 0; i < ts.size();) {
        auto b = next_bucket(ts, i, bucket_bytes, d.device);
        std::vector<torch::Tensor> v{b.buf};
        started->emplace_back(b, d.pg->allreduce(v));
        d.totals->bytes += b.buf.nbytes();
        i = b.j;
      }
    });
    return [this, started, ts] {
      timed([&] {
        for (auto& [b, work] : *started) {
          run(work);
          unpack(b, ts);
        }
      });
    };
  }

  void max(torch::Tensor& t) override {
    timed([&] {
      auto on = t.to(d.device);
      std::vector<torch::Tensor> v{on};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp::MAX;
      run(d.pg->allreduce(v, o));
      t.copy_(on);
      d.totals->bytes += on.nbytes();
    });
  }

  std::vector<torch::Tensor> gather(const torch::Tensor& t) override {
    std::vector<torch::Tensor> parts;
    timed([&] { parts = allgather_padded(d, t, &d.totals->bytes); });
    return parts;
  }
};

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

UMAD_EXPORT int umad_dist_shard_optimizer(umad_dist* dp, umad_model* m, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    torch::NoGradGuard no_grad;
    umad::shard_optimizer(m, d->rank, d->world);
  });
}

UMAD_EXPORT int umad_dist_allgather_params(umad_dist* dp, umad_model* m, int64_t bucket_bytes, int64_t* bytes,
                                           char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (bucket_bytes < 1) throw std::invalid_argument("bucket size must be positive");
    torch::NoGradGuard no_grad;
    auto [params, b] = shard_layout(d, m);
    if (params.pieces.empty()) return;
    int64_t sent = gather_parts(d, b, params, &params, params.pieces[0].scalar_type(), bucket_bytes);
    if (bytes) *bytes = sent;
  });
}

UMAD_EXPORT int umad_dist_gather_optimizer(umad_dist* dp, umad_model* m, int32_t root, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (root < 0 || root >= d->world) throw std::invalid_argument("gather root outside the world");
    torch::NoGradGuard no_grad;
    auto [params, b] = shard_layout(d, m);
    if (params.pieces.empty()) return;
    std::vector<torch::Tensor> whole[2];
    for (int k = 0; k < 2; k++) {
      const int32_t what = k == 0 ? UMAD_EXP_AVG : UMAD_EXP_AVG_SQ;
      Flat mine{umad::shard_moments(m, what), b[size_t(d->rank)]};
      Flat all;  // the root's host copy; the others only send
      if (d->rank == root)
        for (auto& p : params.pieces) all.pieces.push_back(torch::empty({p.numel()}, p.options().device(torch::kCPU)));
      // The root's own part too: its pieces are not all's.
      gather_parts(d, b, mine, d->rank == root ? &all : nullptr, params.pieces[0].scalar_type(), int64_t(64) << 20);
      whole[k] = all.pieces;
    }
    if (d->rank == root) umad::set_gathered(m, whole[0], whole[1]);
  });
}

UMAD_EXPORT int umad_dist_shard_gradients(umad_dist* dp, umad_model* m, int64_t bucket_bytes, char* err,
                                          size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (bucket_bytes < 1) throw std::invalid_argument("bucket size must be positive");
    shard_layout(d, m);  // sharded over this group
    umad::shard_gradients(m, std::make_shared<Comm>(*d, bucket_bytes));
  });
}

UMAD_EXPORT int umad_dist_zero_pass(umad_dist* dp, umad_model* m, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    checked(dp);
    umad::zero_pass(m);
  });
}

UMAD_EXPORT int umad_dist_comm_totals(umad_dist* dp, int64_t* bytes, double* seconds, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (!bytes || !seconds) throw std::invalid_argument("comm totals: NULL argument");
    *bytes = d->totals->bytes;
    *seconds = d->totals->seconds;
  });
}

UMAD_EXPORT int umad_dist_shard_weights(umad_dist* dp, umad_model* m, int64_t bucket_bytes, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    auto d = checked(dp);
    if (bucket_bytes < 1) throw std::invalid_argument("bucket size must be positive");
    umad::shard_weights(m, std::make_shared<Comm>(*d, bucket_bytes), d->rank, d->world);
  });
}

UMAD_EXPORT int umad_dist_empty_forward(umad_dist* dp, umad_model* m, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    checked(dp);
    umad::empty_forward(m);
  });
}

UMAD_EXPORT int umad_dist_hold_weights(umad_dist* dp, umad_model* m, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    checked(dp);
    umad::hold_weights(m);
  });
}

UMAD_EXPORT int umad_dist_release_weights(umad_dist* dp, umad_model* m, char* err, size_t errlen) {
  return umad::guard(err, errlen, [&] {
    checked(dp);
    umad::release_held_weights(m);
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
