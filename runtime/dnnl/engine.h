#pragma once
// The oneDNN CPU engine the kernels share, a stream per calling thread, and the OpenMP thread count
// of the primitives they run. Light on purpose: oneDNN's own headers stay inside the .cc files that
// create and run primitives (runtime/ops/conv.cc, matmul.cc, runtime/dnnl/engine.cc).

#include <cstddef>

namespace dnnl {
struct engine;
struct stream;
}  // namespace dnnl

namespace mf::runtime::dnnl_rt {

// The process-wide CPU engine, created on first use.
const dnnl::engine& cpu_engine();

// An in-order stream on cpu_engine() for the calling thread.
dnnl::stream& thread_stream();

// A per-thread buffer of at least `bytes` (64-byte aligned, kept and grown) for a primitive's
// scratchpad. Every primitive is created with scratchpad_mode::user and gets this at execution:
// with oneDNN's own (library) scratchpad, one primitive run from two threads at once (the row
// blocks of a deterministic matmul) shared its scratch memory and the results changed from run to
// run.
void* thread_scratchpad(size_t bytes);

// Generates oneDNN's sgemm kernels, once per process. Its im2col + sgemm convolution (the plain
// layouts) JIT-compiles them on its first execution, not at creation: about 20 ms on the first
// 1x1 convolution of a network. Called when such a primitive is prepared at compile time, so the
// first run does not pay it.
void warm_up_sgemm();

// The OpenMP thread count a primitive is created for and runs with on the calling thread: the
// kernel's intra-op thread count (runtime_num_threads, runtime/parallel.h). Part of every
// primitive's cache key.
int kernel_threads();

// Sets OpenMP's thread count (omp_set_num_threads) for regions started from the calling thread
// while alive, restoring the previous count after. oneDNN (OpenMP runtime) reads it both when a
// primitive is created (its work split) and when it runs (the team size).
// Which layouts convolutions use: chosen per shape (kAuto, the default), or forced for measuring
// the two paths. Set by the tool at start-up (`mf` reads MF_DNNL_CONV_LAYOUT=plain|blocked|auto):
// the library never reads the environment.
enum class ConvLayout { kAuto, kPlain, kBlocked };
void set_conv_layout(ConvLayout layout);
ConvLayout conv_layout();

class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace mf::runtime::dnnl_rt
