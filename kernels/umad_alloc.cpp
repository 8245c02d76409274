// A caching allocator for libtorch's CPU tensors: on the CPU, what libtorch's CUDA caching
// allocator does on a GPU. glibc maps every block above its mmap threshold (at most 32 MiB)
// afresh and unmaps it on free, so each training pass page-faults its working set back in:
// 876K faults per update at the Qwen2.5-0.5B benchmark shape, about a fifth of the step.
// Freed blocks of at least 1 MiB are kept, up to a cap, for a later request of about their
// size; smaller blocks go to malloc, whose heap reuses them already.
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "umad_compat.h"
#include "umad_internal.h"

namespace {

constexpr size_t kMinCached = size_t(1) << 20;

class CachingCPUAllocator final : public c10::Allocator {
 public:
  CachingCPUAllocator() {
    // At most an eighth of the machine's memory, and never more than 4 GiB, stays cached.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t phys = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
    cap_ = std::min(phys / 8, size_t(4) << 30);
  }

  // A small block frees straight to malloc, without the lock: most tensors are small.
  c10::DataPtr allocate(size_t n) UMAD_ALLOCATE_CONST override {
    if (n < kMinCached) {
      void* p = c10::alloc_cpu(n);
      return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::CPU)};
    }
    void* p = self().take(n);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  // raw_allocate's blocks of every size share this one deleter.
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

#if UMAD_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
#endif

  // empty frees every cached block.
  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : free_) c10::free_cpu(kv.second);
    free_.clear();
    cached_ = 0;
  }

  // Never destroyed: tensors that libtorch's own statics hold are freed at exit, after
  // every destructor of this library has run.
  static CachingCPUAllocator& self() {
    static auto* a = new CachingCPUAllocator();
    return *a;
  }

 private:
  // take returns a cached block of n to n + n/8 bytes (the best fit), or a new one.
  void* take(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(n);
      if (it != free_.end() && it->first <= n + n / 8) {
        void* p = it->second;
        live_[p] = it->first;
        cached_ -= it->first;
        free_.erase(it);
        return p;
      }
    }
    void* p = c10::alloc_cpu(n);  // throws c10::Error when the machine has no memory left
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = n;
    return p;
  }

  static void release(void* p) {
    if (p == nullptr) return;
    auto& a = self();
    {
      std::lock_guard<std::mutex> lock(a.mu_);
      auto it = a.live_.find(p);
      if (it != a.live_.end()) {  // else a small block from raw_allocate: malloc's
        const size_t n = it->second;
        a.live_.erase(it);
        if (a.cached_ + n <= a.cap_) {
          a.free_.emplace(n, p);
          a.cached_ += n;
          return;
        }
      }
    }
    c10::free_cpu(p);
  }

  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;      // cached blocks by size
  std::unordered_map<void*, size_t> live_;  // blocks of at least kMinCached in use
  size_t cached_ = 0, cap_ = 0;
};

}  // namespace

namespace umad {

void install_cpu_allocator() {
  static std::once_flag once;
  // Priority 1 outranks libtorch's default CPU allocator (priority 0).
  std::call_once(once, [] { c10::SetCPUAllocator(&CachingCPUAllocator::self(), 1); });
}

void empty_cpu_cache() { CachingCPUAllocator::self().empty(); }

}  // namespace umad
