// Per-call traces from libtorch's profiler, for umad bench train --profile: when the
// environment names a directory in UMAD_TORCH_PROFILE, every traced entry point writes one
// Chrome trace there, NNNNNN-NAME.json, numbered in call order. Off, a trace costs one branch.
#include <torch/csrc/autograd/profiler_legacy.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "umad_internal.h"

namespace umad {

struct CallTrace::Recording {
  torch::autograd::profiler::RecordProfile profile;
  explicit Recording(const std::string& file) : profile(file) {}
};

CallTrace::CallTrace(const char* name) {
  static const char* dir = std::getenv("UMAD_TORCH_PROFILE");  // read once: setenv races getenv
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> calls{0};
  char file[4096];
  std::snprintf(file, sizeof file, "%s/%06d-%s.json", dir, calls.fetch_add(1), name);
  recording_ = std::make_unique<Recording>(file);
}

CallTrace::~CallTrace() = default;

}  // namespace umad
