// Compile time against graph size: each figure's per_node counter (time / nodes) should stay flat
// as the graph grows 10x and 100x. A counter that grows with the size is a superlinear pass.
//   chain/N          the GRAPH-mode pass pipeline (jit O0) on a chain of N relu nodes
//   nested_calls/N   the same on main -> f0 -> f1 -> ... -> f(N-1), each f one relu and a call:
//                    inlining lands the whole chain in main
//   check/N          parsing and verifying an .ir module of N subgraphs, each called once by main
// Graphs are built as IR text once per size (outside the timing).
//   build/benchmarks/compile_scaling_bench
// Figures: docs/performance.md, "Compile time against graph size".

#include <benchmark/benchmark.h>

#include <string>

#include "context/context.h"
#include "engine/engine_state.h"
#include "engine/graph/driver.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace mf {
namespace {

constexpr const char* kType = "<Tensor[Float32], (4)>";

std::string signature() {
  return std::string("(") + kType + ") -> (" + kType + ")";
}

std::string chain_text(int n) {
  std::string text = std::string("subgraph @main(%para1_x: ") + kType + ") {\n";
  std::string prev = "%para1_x";
  for (int i = 0; i < n; ++i) {
    text += "  %" + std::to_string(i) + " = relu(" + prev + ") : " + signature() + "\n";
    prev = "%" + std::to_string(i);
  }
  return text + "  Return(" + prev + ")\n}\n";
}

// main calls f0; f_i runs relu and calls f_{i+1}.
std::string nested_calls_text(int n) {
  std::string text = std::string("subgraph @main(%para1_x: ") + kType + ") {\n" +
                     "  %0 = call(%para1_x) {graph: \"f0\"} : " + signature() +
                     "\n  Return(%0)\n}\n";
  for (int i = 0; i < n; ++i) {
    text += "\nsubgraph @f" + std::to_string(i) + "(%para1_x: " + kType + ") {\n" +
            "  %0 = relu(%para1_x) : " + signature() + "\n";
    if (i + 1 < n) {
      text += "  %1 = call(%0) {graph: \"f" + std::to_string(i + 1) + "\"} : " + signature() +
              "\n  Return(%1)\n}\n";
    } else {
      text += "  Return(%0)\n}\n";
    }
  }
  return text;
}

// main calls f0, f1, ... in sequence; each f runs one relu.
std::string sibling_calls_text(int n) {
  std::string text = std::string("subgraph @main(%para1_x: ") + kType + ") {\n";
  std::string prev = "%para1_x";
  for (int i = 0; i < n; ++i) {
    text += "  %" + std::to_string(i) + " = call(" + prev + ") {graph: \"f" + std::to_string(i) +
            "\"} : " + signature() + "\n";
    prev = "%" + std::to_string(i);
  }
  text += "  Return(" + prev + ")\n}\n";
  for (int i = 0; i < n; ++i) {
    text += "\nsubgraph @f" + std::to_string(i) + "(%para1_x: " + kType + ") {\n" +
            "  %0 = relu(%para1_x) : " + signature() + "\n  Return(%0)\n}\n";
  }
  return text;
}

passes::CompileOptions graph_mode_options() {
  context::reset();
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O0"}}}});
  return engine::driver_options(*engine::current_policy(), "bench").compile;
}

void per_node(benchmark::State& state, int64_t nodes) {
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void compile_text(benchmark::State& state, const std::string& text, int64_t nodes) {
  const passes::CompileOptions options = graph_mode_options();
  for (auto _ : state) {
    state.PauseTiming();
    auto graph = ir::parse_graph(text);
    state.ResumeTiming();
    benchmark::DoNotOptimize(engine::compile_graph(std::move(graph), options));
  }
  per_node(state, nodes);
}

void chain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  compile_text(state, chain_text(n), n);
}

void nested_calls(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  compile_text(state, nested_calls_text(n), 2 * int64_t{n});
}

void check(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string text = sibling_calls_text(n);
  for (auto _ : state) {
    auto graph = ir::parse_graph(text);
    ir::verify(*graph);
    benchmark::DoNotOptimize(graph);
  }
  per_node(state, 2 * int64_t{n});
}

BENCHMARK(chain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(nested_calls)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(check)->Arg(1000)->Arg(10000)->Arg(50000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mf

BENCHMARK_MAIN();
