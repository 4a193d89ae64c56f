// What deterministic=OFF buys: reduce_sum over the long axis of x[n, 8] (axis 0), which the fixed
// order runs as one task and OFF splits into one chunk per intra-op thread.
//   build/benchmarks/deterministic_bench --benchmark_min_time=0.3
// BM_ReduceColumns/<rows>/<threads>/<deterministic>

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ir/op_def.h"
#include "runtime/parallel.h"

namespace {

using namespace mf;

void BM_ReduceColumns(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const bool deterministic = state.range(2) != 0;
  const ir::OpDef* def = &ir::get_op("reduce_sum");
  std::vector<float> x(static_cast<size_t>(rows * 8));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : x) v = dist(rng);
  std::vector<float> y(8);
  const ir::TensorView in[] = {{x.data(), {ir::DType::kFloat32, {rows, 8}}}};
  const ir::TensorView out[] = {{y.data(), {ir::DType::kFloat32, {8}}}};
  const ir::Attrs attrs = {{"axes", std::vector<int64_t>{0}}, {"keep_dims", false}};
  runtime::ScopedIntraOpThreads scoped(threads);
  for (auto _ : state) {
    def->kernel(ir::KernelContext{in, out, attrs, "reduce_sum", deterministic});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * 8 * 4);
}
BENCHMARK(BM_ReduceColumns)
    ->ArgsProduct({{1 << 16, 1 << 20}, {1, 2}, {1, 0}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
