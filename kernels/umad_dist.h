// The process group of a multi-process run as the collectives' translation units share it
// (not part of the C ABI): the group with its totals, and the buckets tensors travel in.
// umad_dist.cpp makes groups and runs data parallelism's collectives, umad_dist_zero.cpp
// ZeRO's.
#ifndef UMAD_DIST_H
#define UMAD_DIST_H

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "umad_compat.h"
#include "umad_internal.h"
#include "umad_torch.h"

namespace umad {

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

inline Dist* checked(umad_dist* d) {
  if (d == nullptr) throw std::invalid_argument("NULL process group");
  return reinterpret_cast<Dist*>(d);
}

// run waits for a collective; c10d reports a peer that died or a timeout as an exception.
inline void run(const c10::intrusive_ptr<c10d::Work>& w) { w->wait(); }

// A Bucket is tensors [i, j) of a list in one flat buffer on the collective's device; a
// tensor alone, contiguous and already there, is its own buffer (in place, no copy).
struct Bucket {
  size_t i = 0, j = 0;
  torch::Tensor buf;
  bool in_place = false;
};

// next_bucket packs the tensors from i on, up to about bucket_bytes (one tensor larger than
// that is a bucket of its own). All share one dtype.
Bucket next_bucket(const std::vector<torch::Tensor>& ts, size_t i, int64_t bucket_bytes, const torch::Device& dev);

// unpack copies a bucket's buffer back into its tensors (contiguous: their storage is written).
void unpack(const Bucket& b, const std::vector<torch::Tensor>& ts);

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

// allgather_padded returns every rank's 1-d tensor t (lengths may differ), in rank order,
// on t's device: the lengths first, then the tensors padded to the longest (Gloo gathers one
// size). It adds the bytes it handed the all-gathers to *sent.
std::vector<torch::Tensor> allgather_padded(const Dist& d, const torch::Tensor& t, int64_t* sent);

}  // namespace umad

#endif
