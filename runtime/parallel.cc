#include "runtime/parallel.h"
#include "runtime/tsan_sync.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace mf::runtime {
namespace {

int core_count() {
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
}

// One arena per thread count, created on first use and never destroyed: arenas own worker slots,
// and re-creating them per call would cost more than the kernels they run.
class ArenaCache {
 public:
  // Returns the arena for `threads` (already capped to the cores).
  tbb::task_arena& get(int threads) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = arenas_[threads];
    if (!slot) {
      slot = std::make_unique<tbb::task_arena>(threads);
    }
    return *slot;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::unique_ptr<tbb::task_arena>> arenas_;
};

ArenaCache& arena_cache() {
  // Leaked on purpose: kernels may run from static destructors of other objects.
  static ArenaCache* cache = new ArenaCache();
  return *cache;
}

// 0 means "not set on this thread": the default is the core count.
thread_local int tls_threads = 0;

}  // namespace

int intra_op_threads() {
  if (tls_threads <= 0) {
    return core_count();
  }
  return std::min(tls_threads, core_count());
}

ScopedIntraOpThreads::ScopedIntraOpThreads(int threads) : previous_(tls_threads) {
  MF_CHECK(threads >= 1, InvalidArgument, "intra-op thread count must be at least 1, got ",
           threads);
  tls_threads = std::min(threads, core_count());
}

ScopedIntraOpThreads::~ScopedIntraOpThreads() {
  tls_threads = previous_;
}

void parallel_for(int64_t n, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (n <= 0) {
    return;
  }
  if (grain < 1) {
    grain = 1;
  }
  const int threads = intra_op_threads();
  if (n <= grain || threads <= 1) {
    // Same chunk boundaries as the parallel path, so per-chunk reductions agree bit for bit.
    for (int64_t begin = 0; begin < n; begin += grain) {
      fn(begin, std::min(n, begin + grain));
    }
    return;
  }
  const int64_t chunks = (n + grain - 1) / grain;
  // A kernel nested inside another kernel's chunk runs inside the arena already; TBB handles
  // nesting.
  // ThreadSanitizer builds: the caller's writes happen before each chunk, and every chunk before
  // parallel_for returns (runtime/tsan_sync.h).
  const char submitted = 0, finished = 0;
  tsan_release(&submitted);
  arena_cache().get(threads).execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, chunks, 1),
        [&](const tbb::blocked_range<int64_t>& range) {
          tsan_acquire(&submitted);
          // TBB workers do not inherit the caller's thread-local count; a kernel nested in this
          // chunk must see the same count, not the core default.
          ScopedIntraOpThreads inherit(threads);
          for (int64_t chunk = range.begin(); chunk < range.end(); ++chunk) {
            const int64_t begin = chunk * grain;
            fn(begin, std::min(n, begin + grain));
          }
          tsan_release(&finished);
        },
        tbb::simple_partitioner());
  });
  tsan_acquire(&finished);
}

}  // namespace mf::runtime
