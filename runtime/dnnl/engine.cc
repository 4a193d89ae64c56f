// oneDNN and threads on this machine.
//
// Debian 12's libdnnl 2.6 is built with the OpenMP CPU runtime (libgomp): a primitive splits its
// work among the threads of an OpenMP team, not in the engine's oneTBB arena (runtime/parallel.h).
// 2.6 has no thread-count API for that runtime (dnnl_threadpool_interop_* is for the threadpool
// runtime only), so the count is OpenMP's own: omp_set_num_threads on the calling thread, which
// sets the nthreads ICV for regions that thread starts. oneDNN reads it twice: when a primitive is
// created (dnnl_get_max_threads() picks the work split, e.g. brgconv's nthr) and when it runs (the
// team size of `#pragma omp parallel num_threads(nthr)`). So every kernel sets it to the intra-op
// thread count (runtime_num_threads) around both, and the count is part of the primitive cache
// key: a primitive created for 2 threads would start a team of 2 even when the caller now allows
// one. With one thread oneDNN runs the primitive inline on the caller: no team, no OpenMP thread.
//
// OpenMP and TBB on 2 cores. After a region, libgomp's workers spin before sleeping
// (OMP_WAIT_POLICY unset: GOMP_SPINCOUNT 300000 spins, roughly 0.1-0.3 ms here), and TBB's workers
// do the same after a parallel_for. A conv (OpenMP team: caller + 1 libgomp worker) followed by an
// elementwise op (TBB: caller + 1 TBB worker) can find the other core busy with the spinning
// libgomp worker. libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT only in its constructor, which
// runs before ours (libgomp is loaded as a dependency of libdnnl, itself a dependency of this
// library), so they cannot be set programmatically from here; setenv() afterwards has no effect.
// What was measured (benchmarks/dnnl_kernels_bench.cc, BM_ConvThenRelu) is recorded below; the
// environment variables remain the way to change the policy (OMP_WAIT_POLICY=passive makes the
// libgomp worker sleep at once). Measured (BM_ConvThenRelu: a 3x3 64 -> 64 conv on 56x56, then 4
// relus): 1 thread 1444 us, 2 threads 832 us with libgomp's default spinning; with
// OMP_WAIT_POLICY=passive 1402 us and 1029 us. Spinning costs nothing visible here and passive
// makes 2 threads slower (the team is woken from sleep on every conv), so the default is kept.
//
// Determinism: the plain-layout convolution (gemm:jit, im2col + sgemm) gave different bits at 1
// and 2 threads (3x3 512 -> 512 on 7x7, batch 2), so `deterministic` runs conv2d in the blocked
// layouts; products in deterministic mode use fixed row blocks, each a one-thread primitive
// (runtime/ops/matmul.cc). tests/runtime/dnnl_kernels_test.cc compares the bytes.

#include "runtime/dnnl/engine.h"

#include <atomic>

#include <omp.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/parallel.h"

namespace mf::runtime::dnnl_rt {

const dnnl::engine& cpu_engine() {
  // Leaked on purpose: kernels may run from static destructors of other objects.
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

void* thread_scratchpad(size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    std::free(buffer.data);
    buffer.size = (bytes + 63) / 64 * 64;
    buffer.data = std::aligned_alloc(64, buffer.size);
  }
  return buffer.data;
}

void warm_up_sgemm() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A product of a convolution's proportions (weights x im2col columns); the kernels are shared
    // by every shape and thread count.
    constexpr dnnl_dim_t m = 64, n = 256, k = 64;
    std::vector<float> a(m * k, 0.f), b(k * n, 0.f), c(m * n);
    ScopedOmpThreads one(1);
    dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
  });
}

int kernel_threads() {
  return intra_op_threads();
}

ScopedOmpThreads::ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()) {
  if (threads != previous_) omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
}

namespace {
std::atomic<ConvLayout> conv_layout_setting{ConvLayout::kAuto};
}  // namespace

void set_conv_layout(ConvLayout layout) {
  conv_layout_setting = layout;
}
ConvLayout conv_layout() {
  return conv_layout_setting;
}

}  // namespace mf::runtime::dnnl_rt
