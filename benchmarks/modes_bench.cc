// Per-op overhead (`chain`: 1,000 dependent adds on 16 floats) and whole-network time (mlp, cnn,
// transformer) in PYNATIVE sync, PYNATIVE async, PYNATIVE with the network jit-compiled (set_jit:
// what `jit` buys inside the default mode), GRAPH O0, O1 and O2. Compare ratios within one run:
//   build/benchmarks/modes_bench --benchmark_min_time=0.5
// Each iteration waits for the network's output, so asynchronous runs are timed to completion.

#include <benchmark/benchmark.h>

#include <modeflow/modeflow.h>

namespace {

using namespace mf;

struct Mode {
  const char* label;
  context::Json settings;
  bool jit = false;  // the network marked for jit (compiled inside PYNATIVE mode)
};

const Mode kModes[] = {
    {"pynative_sync", {{"mode", "PYNATIVE_MODE"}, {"pynative_synchronize", true}}},
    {"pynative_async", {{"mode", "PYNATIVE_MODE"}, {"pynative_synchronize", false}}},
    {"pynative_jit_O1",
     {{"mode", "PYNATIVE_MODE"},
      {"pynative_synchronize", true},
      {"jit_config", {{"jit_level", "O1"}}}},
     true},
    {"graph_O0", {{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O0"}}}}},
    {"graph_O1", {{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O1"}}}}},
    {"graph_O2", {{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O2"}}}}},
};

void run_network(benchmark::State& state, const std::string& net_name, const Mode& mode) {
  context::reset();
  context::set(mode.settings);
  const models::NetSpec& spec = models::find_net(net_name);
  auto net = spec.make(0);
  net->set_jit(mode.jit);
  Tensor x = spec.make_input(0);
  (*net)(x).sync();  // compile (GRAPH) and warm the memory pool outside the timing
  for (auto _ : state) {
    Tensor y = (*net)(x);
    y.sync();
    benchmark::DoNotOptimize(y.raw_data());
  }
  if (net_name == "chain") {
    state.counters["us_per_op"] = benchmark::Counter(
        1000.0 * state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert,
        benchmark::Counter::kIs1000);
  }
  context::reset();
}

int register_all() {
  for (const char* net : {"chain", "mlp", "cnn", "transformer"}) {
    for (const Mode& mode : kModes) {
      benchmark::RegisterBenchmark(
          (std::string(net) + "/" + mode.label).c_str(),
          [net, &mode](benchmark::State& state) { run_network(state, net, mode); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
