// Where the `elementwise` sample network's fused kernel stands against the two floors it can hit:
// memory (read x, write y once) and compute (its own math with the data in cache).
//   elementwise/<n>/opt<k>/threads<t>  the `elementwise` net's body on n floats, GRAPH O1,
//                                      graph_kernel_flags --opt_level=k
//   clamp_chain/<n>/opt<k>/threads<t>  the `clamp_chain` net: eight one-instruction ops,
//                                      min(relu(x*1.5 + 0.5), 6) - 0.25*x + |x|; at opt 1 one
//                                      fused kernel run as generated code (runtime/fused_jit.h)
//   clamp_chain/<n>/opt1/tiles/...     the same kernel on the tile evaluator (generator off): what
//                                      loading and storing every op's tile costs
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

#include "runtime/fused_jit.h"

#include <memory>
#include <string>

namespace {

using namespace mf;

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

// One cell: a sample network (`mf bench --nets NAME`) on an input of n floats.
void register_net(const std::string& net, int64_t n, int opt, int threads, bool generated) {
  const std::string name = net + "/" + std::to_string(n) + "/opt" + std::to_string(opt) +
                           (opt > 0 && !generated ? "/tiles" : "") + "/threads" +
                           std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    runtime::set_fused_jit_enabled(generated);
    const std::unique_ptr<nn::Cell> cell = models::find_net(net).make(0);
    run(state, *cell, n, opt, threads);
    runtime::set_fused_jit_enabled(true);
  })->UseRealTime();
}

int register_all() {
  for (const int64_t n : {int64_t{8388608}, int64_t{65536}}) {
    for (const int threads : {1, 2}) {
      benchmark::RegisterBenchmark(
          ("copy/" + std::to_string(n) + "/threads" + std::to_string(threads)).c_str(),
          [n, threads](benchmark::State& state) {
            Copy cell;
            run(state, cell, n, 0, threads);
          })
          ->UseRealTime();
      for (const char* net : {"elementwise", "clamp_chain"}) {
        register_net(net, n, 0, threads, true);
        register_net(net, n, 1, threads, true);
      }
      register_net("clamp_chain", n, 1, threads, false);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
