#pragma once
// The compile-and-run driver: the one place that turns a Policy into typed compile and run
// options, looks a graph up in the persistent compile cache (and stores what it compiles), runs
// the pass pipeline (the only caller of passes::compile), builds the executor the Policy chose,
// and runs it with the Running Data Recorder the context asks for. Every caller goes through it:
// cells in GRAPH mode and jit-compiled cells and functions in PYNATIVE
// (engine/graph/graph_mode.cc), .ir and .onnx runs (engine/eager/ir_runner.cc), `mf bisect`, `mf
// passes`, `mf dump` and the benchmarks, so a new option is added here once and `mf passes` cannot
// drift from what compiles.

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "context/fingerprint.h"
#include "context/policy.h"
#include "engine/graph/freeze_weights.h"
#include "ir/symbolic_graph.h"
#include "passes/compile_options.h"
#include "passes/compiler.h"
#include "runtime/graph_executor.h"

namespace mf::engine {

// Everything one compile and its runs need, typed, derived from a Policy by driver_options().
// Callers with a reason of their own (bisect's cuts, tests) adjust fields before compile().
struct DriverOptions {
  passes::CompileOptions compile;
  runtime::RunOptions run;  // on_step is set per run (the recorder)
  context::Executor executor = context::Executor::kKernelByKernel;
  bool compile_cache = false;  // look up, and store into, the policy's compile_cache_dir
  bool precompile_only = false;
};

// The one place decisions become options. `dump_prefix` starts every dump file's name.
DriverOptions driver_options(const context::Policy& policy, std::string dump_prefix);

struct HitRecovery;  // engine/graph/driver.cc

// One compiled form of a graph: the optimized graph with its plan, and the executor that runs it.
struct CompiledNetwork {
  context::Fingerprint fingerprint;
  context::JitLevel jit_level = context::JitLevel::kO0;
  passes::CompiledGraph compiled;
  std::unique_ptr<runtime::GraphExecutor> executor;
  double compile_ms = 0;        // key, lookup, passes or load, store, executor, kernel preparation
  size_t prepared_kernels = 0;  // nodes whose oneDNN primitives were created at compile time
  // enable_compile_cache: whether the graph was loaded, the key, and what happened ("loaded, ...",
  // "stored in DIR; nearest entry ... differs in: ..."). Empty key: the cache was off.
  bool cache_hit = false;
  std::string cache_key, cache_note;
  // A hit keeps its trace and options until its first run has succeeded: if that run fails, the
  // entry is discarded, the trace compiled, stored and run instead (a stored entry that passes its
  // checks but fails is a miss, never a failure of every later run).
  std::shared_ptr<HitRecovery> recovery;
  // jit_config.infer_boost=on: the weights compiled in as constants
  // (engine/graph/freeze_weights.h); a run binding other weight tensors needs another compile.
  FrozenWeights frozen_weights;
  // 1 when a node writes an input in place (assign): after each run every bound input's buffer is
  // marked written; -1 until the first run looks.
  int writes_inputs = -1;
};

// Finds the tensor of a weight parameter (an undefined Tensor: not known, stays bound at run time).
using WeightLookup = std::function<Tensor(const ir::Parameter&)>;

// Compiles `graph` (a trace or a parsed graph) under `options`. With options.compile_cache a hit
// loads the stored graph and plan instead of running any pass, and a miss stores what it compiled.
// Then the oneDNN primitives of its kernels are created (unless precompile_only), so the first run
// creates none.
// `input` is the input type the cache key names (a cell's input; for a parsed graph its first
// parameter: every parameter's type is in the graph's canonical form anyway).
// With policy.infer_boost and a `weights` lookup, the weights become constants of the graph first
// (so the cache key covers their bytes).
std::unique_ptr<CompiledNetwork> compile(std::unique_ptr<ir::Graph> graph,
                                         const ir::TensorType& input, const context::Policy& policy,
                                         const context::Fingerprint& fingerprint,
                                         const DriverOptions& options,
                                         const WeightLookup& weights = {});

// A graph already through the passes (bisect's variants of a compiled graph): verified, planned
// and given its executor with its kernels prepared, as compile() does after the passes; no pass
// runs and nothing is cached.
std::unique_ptr<CompiledNetwork> compile_planned(std::unique_ptr<ir::Graph> graph,
                                                 const context::Policy& policy,
                                                 const DriverOptions& options);

// The pass pipeline alone, no cache and no executor: for tests and benchmarks that look at the
// compiled graph itself.
passes::CompiledGraph compile_graph(std::unique_ptr<ir::Graph> graph,
                                    const passes::CompileOptions& options);

// The executor `kind` names, over `plan` (KernelExecutor or SinkExecutor).
std::unique_ptr<runtime::GraphExecutor> make_executor(context::Executor kind,
                                                      std::shared_ptr<const runtime::Plan> plan);

// One compile for every size of a graph with dynamic inputs (ir/symbolic_graph.h), or why there
// is none (then each size compiles on its own).
struct SymbolicCompile {
  std::shared_ptr<const ir::SymbolicGraph> graph;  // compiled in this process
  // Loaded from the compile cache instead: the symbolic text, parsed at each size bound.
  std::string text;
  std::vector<std::string> input_names;  // the parameter of each declared input
  std::string why_not;
  std::vector<std::filesystem::path> dump_files;  // save_graphs: the first binding's and symbolic
  double compile_ms = 0;
  bool cache_hit = false;
  std::string cache_key, cache_note;  // enable_compile_cache: the key and what happened
  bool usable() const { return graph != nullptr || !text.empty(); }
};

// The most elements a probe input may hold (64 Mi): beyond it each size compiles on its own.
inline constexpr int64_t kMaxProbeElements = int64_t{1} << 26;

// Runs the passes on `first` (the graph at plan.first) and `probe` (at plan.probe, without dumps)
// and generalizes them; save_graphs also writes DIR/<prefix>_symbolic.ir. `input_parameters[i]`
// is the parameter of plan.inputs[i]. Errors compiling the probe become why_not. With the compile
// cache on, the probe's trace keys an entry holding the symbolic text: a hit runs no pass, in
// any process and at any first size, and a miss stores what it compiled.
SymbolicCompile compile_symbolic(std::unique_ptr<ir::Graph> first,
                                 const std::function<std::unique_ptr<ir::Graph>()>& probe,
                                 const ir::ProbePlan& plan, std::vector<size_t> input_parameters,
                                 const context::Policy& policy,
                                 const context::Fingerprint& fingerprint,
                                 const DriverOptions& options);

// The compiled form of `symbolic` at `shapes` (one per declared input): sizes substituted, shapes
// re-inferred, memory planned and kernels prepared; no pass runs.
std::unique_ptr<CompiledNetwork> bind_symbolic(const SymbolicCompile& symbolic,
                                               const std::vector<ir::Shape>& shapes,
                                               const context::Policy& policy,
                                               const context::Fingerprint& fingerprint,
                                               const DriverOptions& options);

// Runs a compiled network on inputs in graph-parameter order under the policy's run options, with
// the Running Data Recorder the context asks for. An error gets "while running `what` in MODE
// (jit_level Ox)" as context. The first run of a cache hit that fails recompiles and runs again
// (see CompiledNetwork::recovery).
std::vector<runtime::TensorArg> run(CompiledNetwork& network,
                                    std::span<const runtime::TensorArg> inputs,
                                    const context::Policy& policy,
                                    const context::Snapshot& snapshot, std::string_view what);

}  // namespace mf::engine
