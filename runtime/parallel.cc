#include "runtime/parallel.h"
#include "runtime/tsan_sync.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "runtime/profiler.h"

namespace mf::runtime {
namespace {

int core_count() {
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
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
  // Inside another kernel's chunk (a nested region): the chunks run here, in order.
  if (omp_in_parallel()) {
    for (int64_t begin = 0; begin < n; begin += grain) fn(begin, std::min(n, begin + grain));
    return;
  }
  // The chunks run on the OpenMP team oneDNN's primitives run on, not on a pool of their own. With
  // a oneTBB arena beside it, the two pools fought over the cores: after each primitive libgomp
  // keeps its threads spinning for the next region (letting them sleep instead costs a wake-up
  // per primitive: slower still), so a kernel between two convolutions had one core, not two.
  // Measured with `mf run NET.onnx --set runtime_num_threads=2`, TBB -> OpenMP: mobilenet_v2 op
  // by op 8.8 -> 6.3 ms, GRAPH O1 3.38 -> 3.21 ms; resnet18 op by op 16.4 -> 15.7 ms, GRAPH O1
  // 12.0 -> 11.3 ms. Chunks are taken from a shared counter, so their boundaries (and the
  // per-chunk reductions) stay independent of the thread count.
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  // Under a profile, each worker's share of the chunks is an event on its own track, named after
  // the caller's kernel (null, and nothing recorded, outside a profile).
  const char* kernel = Profiler::active() ? profile_current_kernel() : nullptr;
  const std::thread::id caller = kernel ? std::this_thread::get_id() : std::thread::id();
  std::atomic<int> worker_numbers{1};
  // What each thread of the team runs: chunks from the shared counter until none is left.
  auto take_chunks = [&] {
    // Team threads do not inherit the caller's thread-local count; a kernel nested in a chunk must
    // see the same count, not the core default.
    ScopedIntraOpThreads inherit(threads);
    const bool worker = kernel != nullptr && std::this_thread::get_id() != caller;
    std::optional<WorkerTimer> timer;
    if (worker) {
      timer.emplace(kernel, omp_in_parallel() ? omp_get_thread_num() : worker_numbers.fetch_add(1));
    }
    for (int64_t chunk = next.fetch_add(1); chunk < chunks; chunk = next.fetch_add(1)) {
      try {
        const int64_t begin = chunk * grain;
        fn(begin, std::min(n, begin + grain));
        if (timer) timer->chunk_done();
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(chunks);  // the other chunks are not started
      }
    }
  };
#if defined(MF_TSAN) || defined(__clang__)
  // ThreadSanitizer builds: libgomp is not instrumented and starts its team through futexes, and
  // the region reads its shared variables before any annotation could run, so TSan saw every
  // chunk race with the caller (220 reports in runtime_tests). There the chunks run on threads of
  // their own, whose start and join TSan sees; races between chunks are still reported. Clang
  // builds (the sanitizer and fuzz builds) do the same: Clang's `omp parallel` needs libomp,
  // which Debian's clang-16 does not ship (cmake/Sanitizers.cmake).
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(take_chunks);
  take_chunks();
  for (std::thread& helper : helpers) helper.join();
#else
#pragma omp parallel num_threads(threads)
  take_chunks();
#endif
  if (failure) std::rethrow_exception(failure);
}

}  // namespace mf::runtime
