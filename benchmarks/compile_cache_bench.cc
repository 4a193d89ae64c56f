// The compile phase of GRAPH mode on `transformer`, piece by piece, with and without the
// persistent compile cache (enable_compile_cache), at jit O0, O1 and O2:
//   compile/<jit>       the pass pipeline on the trace (no cache) + building the executor
//   miss/<jit>          what a first process pays: key, miss explanation, compile, store, executor
//   key/<jit>           make_cache_key (canonical digest of the trace, every component)
//   digest/<jit>        ir::canonical_digest of the trace alone (printer and hasher)
//   load/<jit>          CompileCache::load on a hit (read, checks, graph rebuilt, plan checked)
//   executor/<jit>      building the executor from the plan (paid by a compile and a hit alike)
//   hit/<jit>           what a later process pays: key + load + executor
// The tracing itself is outside every figure, as it is outside GRAPH mode's compile_ms. Within one
// process every cost is warm (code paged in, allocator primed); `mf run` in a fresh process pays
// more for each phase, so docs/performance.md's ratios come from process pairs, these from one run:
//   build/benchmarks/compile_cache_bench --benchmark_min_time=0.5

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "context/context.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/engine_state.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "ir/serialize.h"
#include "runtime/graph_executor.h"

namespace {

using namespace mf;
namespace fs = std::filesystem;

// The transformer traced once under GRAPH mode at one jit level, with its key and a stored entry.
struct Fixture {
  explicit Fixture(const std::string& jit) {
    context::reset();
    dir = fs::temp_directory_path() / ("mf_cc_bench_" + std::to_string(::getpid()) + "_" + jit);
    fs::remove_all(dir);
    context::set({{"mode", "GRAPH_MODE"},
                  {"jit_config", {{"jit_level", jit}}},
                  {"enable_compile_cache", true},
                  {"compile_cache_path", dir.string()}});
    const models::NetSpec& spec = models::find_net("transformer");
    cell = spec.make(0);
    input = spec.make_input(0);
    engine::current_policy();
    const context::Snapshot snapshot = context::snapshot();
    policy = context::derive_policy(snapshot, cell->jit_level());
    fingerprint = context::fingerprint(snapshot, policy);
    trace = engine::Tracer::trace(*cell, input, policy.max_call_depth.value,
                                  policy.reserve_class_name_in_scope.value);
    options = engine::driver_options(policy, "bench").compile;
    key = engine::make_cache_key(*trace.graph, input.type(), fingerprint);
    cache_dir = policy.compile_cache_dir.value;
    const passes::CompiledGraph compiled = engine::compile_graph(trace.graph->clone(), options);
    engine::CompileCache(cache_dir).store(key, compiled, 0);
  }
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
    context::reset();
  }

  std::unique_ptr<runtime::GraphExecutor> executor(
      std::shared_ptr<const runtime::Plan> plan) const {
    return engine::make_executor(policy.executor.value, std::move(plan));
  }

  fs::path dir, cache_dir;
  std::unique_ptr<nn::Cell> cell;
  Tensor input;
  context::Policy policy;
  context::Fingerprint fingerprint;
  engine::TraceResult trace;
  passes::CompileOptions options;
  engine::CacheKey key;
};

void compile(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<ir::Graph> graph = f.trace.graph->clone();
    state.ResumeTiming();
    passes::CompiledGraph compiled = engine::compile_graph(std::move(graph), f.options);
    benchmark::DoNotOptimize(f.executor(compiled.plan));
  }
}

void miss(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  for (auto _ : state) {
    state.PauseTiming();
    engine::CompileCache(f.cache_dir).clear();
    std::unique_ptr<ir::Graph> graph = f.trace.graph->clone();
    state.ResumeTiming();
    engine::CacheLookup lookup =
        engine::lookup_compiled(f.policy, *graph, f.input.type(), f.fingerprint);
    if (lookup.compiled) state.SkipWithError("expected a miss");
    passes::CompiledGraph compiled = engine::compile_graph(std::move(graph), f.options);
    benchmark::DoNotOptimize(engine::store_compiled(f.policy, lookup, compiled, 1.0));
    benchmark::DoNotOptimize(f.executor(compiled.plan));
  }
}

void key(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        engine::make_cache_key(*f.trace.graph, f.input.type(), f.fingerprint).hex);
  }
}

void digest(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  for (auto _ : state) benchmark::DoNotOptimize(ir::canonical_digest(*f.trace.graph));
}

void load(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  const engine::CompileCache cache(f.cache_dir);
  for (auto _ : state) {
    auto loaded = cache.load(f.key, *f.trace.graph);
    if (!loaded) state.SkipWithError("expected a hit");
    benchmark::DoNotOptimize(loaded);
  }
}

void executor(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  const passes::CompiledGraph compiled = engine::compile_graph(f.trace.graph->clone(), f.options);
  for (auto _ : state) benchmark::DoNotOptimize(f.executor(compiled.plan));
}

void hit(benchmark::State& state, const std::string& jit) {
  Fixture f(jit);
  for (auto _ : state) {
    engine::CacheLookup lookup =
        engine::lookup_compiled(f.policy, *f.trace.graph, f.input.type(), f.fingerprint);
    if (!lookup.compiled) state.SkipWithError("expected a hit");
    benchmark::DoNotOptimize(f.executor(lookup.compiled->plan));
  }
}

int register_all() {
  using Fn = void (*)(benchmark::State&, const std::string&);
  const std::pair<const char*, Fn> phases[] = {
      {"compile", compile}, {"miss", miss},         {"key", key}, {"digest", digest},
      {"load", load},       {"executor", executor}, {"hit", hit}};
  for (const char* jit : {"O0", "O1", "O2"}) {
    for (const auto& [name, fn] : phases) {
      benchmark::RegisterBenchmark((std::string(name) + "/" + jit).c_str(),
                                   [fn, jit](benchmark::State& state) { fn(state, jit); })
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
