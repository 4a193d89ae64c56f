#pragma once
// Intra-op parallelism on the OpenMP team that oneDNN's primitives also run on, sized by the
// context's runtime_num_threads (in effect, capped to the cores). Chunk boundaries depend only on n
// and grain, never on the thread count, so a kernel that reduces per chunk and combines chunks in
// order is deterministic for any thread count.

#include <cstdint>
#include <functional>

namespace mf::runtime {

// Runs fn(begin, end) over [0, n) in chunks of `grain` elements (the last may be shorter) on the
// intra-op threads. Serial when n <= grain, at one thread, or inside another parallel_for's chunk
// (in order, here). The first exception propagates; chunks not yet started then do not run.
void parallel_for(int64_t n, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end)>& fn);

// The thread count kernels on this thread use (>= 1).
int intra_op_threads();

// Sets the intra-op thread count for kernels run on the calling thread while alive (executors set
// it from RunOptions); nests and restores the previous value.
class ScopedIntraOpThreads {
 public:
  explicit ScopedIntraOpThreads(int threads);
  ~ScopedIntraOpThreads();
  ScopedIntraOpThreads(const ScopedIntraOpThreads&) = delete;
  ScopedIntraOpThreads& operator=(const ScopedIntraOpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace mf::runtime
