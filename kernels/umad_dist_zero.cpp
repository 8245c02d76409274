// ZeRO's collectives over a process group (umad_dist.h): stage 1's sharded moments (the
// updated parts' all-gather, the moments gathered for a checkpoint), stage 2's gradient sums
// from inside the backward and stage 3's weights gathered a layer at a time (Comm, which
// umad_zero.cpp calls), and the totals of what they moved.

#include "umad_dist.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

using namespace umad;

namespace {

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

}  // namespace

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
