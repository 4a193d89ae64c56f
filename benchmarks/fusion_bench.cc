// Where the `elementwise` sample network's fused kernel stands against the two floors it can hit:
// memory (read x, write y once) and compute (its own math with the data in cache).
//   elementwise/<n>/opt<k>/threads<t>  the `elementwise` net's body on n floats, GRAPH O1,
//                                      graph_kernel_flags --opt_level=k
//   cheap/<n>/opt<k>/threads<t>        a chain of eight cheap ops (no transcendental math):
//                                      min(relu(x*1.5 + 0.5), 6) - 0.25*x + |x|; what the fused
//                                      evaluator itself costs per op when the math is nearly free
//   copy/<n>/threads<t>                one `neg` kernel on n floats: read x, write y once, through
//                                      the same runtime (the memory floor as the engine meets it)
// n = 8,388,608 is the sample network's input (64 MiB moved, far beyond the caches); n = 65,536
// keeps x, y and the tile buffers in each core's L2, so its time per element is what the fused
// kernel's math costs with memory out of the way. If that compute floor is above 1.5x the copy's
// time per element at 8M, no fusion can bring the net within 1.5x of memory speed.
// items_per_second counts elements of x; compare within one run:
//   build/benchmarks/fusion_bench --benchmark_min_time=0.5

#include <benchmark/benchmark.h>

#include <modeflow/modeflow.h>

#include <memory>
#include <string>

namespace {

using namespace mf;

// Eight ops, each a handful of instructions per packet.
class CheapChain : public nn::Cell {
 public:
  CheapChain() : Cell("CheapChain") {}
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::add(ops::mul(x, ops::scalar(1.5)), ops::scalar(0.5));
    y = ops::minimum(ops::relu(y), ops::scalar(6.0));
    return ops::add(ops::sub(y, ops::mul(ops::scalar(0.25), x)), ops::abs(x));
  }
};

class Copy : public nn::Cell {
 public:
  Copy() : Cell("Copy") {}
  Tensor forward(const Tensor& x) override { return ops::neg(x); }
};

void run(benchmark::State& state, nn::Cell& cell, int64_t n, int opt_level, int threads) {
  context::reset();
  context::set({{"mode", "GRAPH_MODE"},
                {"jit_config", {{"jit_level", "O1"}}},
                {"graph_kernel_flags", "--opt_level=" + std::to_string(opt_level)},
                {"runtime_num_threads", threads}});
  const Tensor x = Tensor::randn({n}, 1000);
  cell(x).sync();  // compile and warm the pool outside the timing
  for (auto _ : state) {
    Tensor y = cell(x);
    y.sync();
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(n * static_cast<int64_t>(state.iterations()));
  context::reset();
}

int register_all() {
  for (const int64_t n : {int64_t{8388608}, int64_t{65536}}) {
    for (const int threads : {1, 2}) {
      const std::string size = "/" + std::to_string(n);
      const std::string thread_count = "/threads" + std::to_string(threads);
      benchmark::RegisterBenchmark(("copy" + size + thread_count).c_str(),
                                   [n, threads](benchmark::State& state) {
                                     Copy cell;
                                     run(state, cell, n, 0, threads);
                                   })
          ->UseRealTime();
      for (const int opt : {0, 1}) {
        benchmark::RegisterBenchmark(
            ("cheap" + size + "/opt" + std::to_string(opt) + thread_count).c_str(),
            [n, opt, threads](benchmark::State& state) {
              CheapChain cell;
              run(state, cell, n, opt, threads);
            })
            ->UseRealTime();
        benchmark::RegisterBenchmark(
            ("elementwise" + size + "/opt" + std::to_string(opt) + thread_count).c_str(),
            [n, opt, threads](benchmark::State& state) {
              // The sample network itself (`mf bench --nets elementwise`), on an input of n floats.
              const std::unique_ptr<nn::Cell> cell = models::find_net("elementwise").make(0);
              run(state, *cell, n, opt, threads);
            })
            ->UseRealTime();
      }
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
