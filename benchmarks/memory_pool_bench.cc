// The memory pool's allocate/free cost and a first touch of fresh memory:
//   build/benchmarks/memory_pool_bench --benchmark_min_time=0.2
// BM_AllocateFreeWithFreeChunks/N: one allocate + free while N free chunks (kept apart by live
// separators) sit in the pool; best fit is a lower_bound in a size-ordered set, so the time should
// not grow with N. BM_FirstTouch: allocating and writing 64 MiB of never-touched block memory
// (a fresh pool each iteration): the page faults a first run pays. Compare with transparent huge
// pages off: MF_POOL_HUGE_PAGES=0 build/benchmarks/memory_pool_bench --benchmark_filter=FirstTouch

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/memory_pool.h"

namespace {

using namespace mf::runtime;

constexpr size_t kMiB = size_t(1) << 20;

void BM_AllocateFreeWithFreeChunks(benchmark::State& state) {
  const int holes = static_cast<int>(state.range(0));
  auto pool = make_memory_pool({.max_bytes = size_t(64) << 30, .block_bytes = size_t(1) << 30});
  std::vector<std::shared_ptr<Buffer>> separators;
  {
    std::vector<std::shared_ptr<Buffer>> freed;
    for (int i = 0; i < holes; ++i) {
      freed.push_back(pool->allocate(4096 + 64 * size_t(i % 512), "hole"));
      separators.push_back(pool->allocate(64, "separator"));
    }
  }
  size_t i = 0;
  for (auto _ : state) {
    auto buffer = pool->allocate(4096 + 64 * (i++ % 512), "bench");
    benchmark::DoNotOptimize(buffer->data());
  }
  state.counters["free_chunks"] = static_cast<double>(pool->stats().free_chunks);
}
BENCHMARK(BM_AllocateFreeWithFreeChunks)->Arg(16)->Arg(1024)->Arg(65536);

void BM_FirstTouch(benchmark::State& state) {
  const size_t bytes = 64 * kMiB;
  for (auto _ : state) {
    auto pool = make_memory_pool({.max_bytes = size_t(64) << 30, .block_bytes = size_t(1) << 30});
    auto buffer = pool->allocate(bytes, "touch");
    std::memset(buffer->data(), 1, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_FirstTouch)->Unit(benchmark::kMillisecond);

}  // namespace

// MF_POOL_HUGE_PAGES=0 turns huge pages off for this run (the library never reads the environment).
const bool kHugePagesFromEnvironment = [] {
  if (const char* v = std::getenv("MF_POOL_HUGE_PAGES"); v != nullptr && std::string(v) == "0") {
    mf::runtime::set_huge_pages(false);
  }
  return true;
}();

BENCHMARK_MAIN();
