#include "engine/graph/driver.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <variant>

#include "base/error.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/graph/recorder.h"
#include "ir/call_graph.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/dump.h"
#include "passes/plan_memory.h"
#include "runtime/profiler.h"

namespace mf::engine {
namespace {

using Clock = std::chrono::steady_clock;
double millis_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

passes::FusionOptions fusion_options(const context::Policy& policy) {
  const context::GraphKernelFlags& flags = policy.fusion_flags;
  passes::FusionOptions fusion;
  fusion.dump_as_text = flags.dump_as_text;
  fusion.enable_expand_ops = flags.enable_expand_ops;
  fusion.enable_expand_ops_only = flags.enable_expand_ops_only;
  fusion.disable_expand_ops = flags.disable_expand_ops;
  fusion.enable_cluster_ops = flags.enable_cluster_ops;
  fusion.enable_cluster_ops_only = flags.enable_cluster_ops_only;
  fusion.disable_cluster_ops = flags.disable_cluster_ops;
  fusion.stitch = policy.stitch_fusion.value;
  fusion.parallel = policy.parallel_fusion.value;
  fusion.recompute = policy.recompute_fusion.value;
  fusion.reduce_fuse_depth = flags.reduce_fuse_depth;
  if (flags.composite_op_limit_size)
    fusion.composite_op_limit_size = *flags.composite_op_limit_size;
  return fusion;
}

// Built at every run: only the few scalars a run needs, not the whole compile side.
runtime::RunOptions run_options(const context::Policy& policy) {
  runtime::RunOptions run;
  run.intra_op_threads = policy.intra_op_threads.value;
  run.inter_op_parallelism = policy.inter_op_parallelism.value;
  run.deterministic = policy.deterministic.value;
  run.max_call_depth = policy.max_call_depth.value;
  return run;
}

}  // namespace

// What a cache hit needs to fall back on compiling: the lookup (its key), the trace and the
// options.
struct HitRecovery {
  CacheLookup lookup;
  std::unique_ptr<ir::Graph> source;
  DriverOptions options;
};

DriverOptions driver_options(const context::Policy& policy, std::string dump_prefix) {
  DriverOptions options;
  passes::CompileOptions& compile = options.compile;
  compile.jit_level = policy.jit_level.value;
  compile.fusion_level = policy.fusion_level.value;
  compile.fusion = fusion_options(policy);
  compile.enable_passes = policy.fusion_flags.enable_pass;
  compile.disable_passes = policy.fusion_flags.disable_pass;
  compile.format_transform = policy.format_transform.value;
  const bool debug = policy.debug_level.value == context::DebugLevel::kDebug;
  compile.verify_every_pass = debug;
  compile.write_failing_graph = debug;
  compile.dump.full_detail = debug;
  compile.memory_level = policy.memory_optimize_level.value == context::MemoryOptimizeLevel::kO1
                             ? passes::MemoryLevel::kO1
                             : passes::MemoryLevel::kO0;
  compile.memory_reuse = policy.memory_reuse.value;
  compile.deterministic = policy.deterministic.value;
  compile.dump.level = policy.dump_level.value;
  compile.dump.dir = policy.dump_dir.value;
  compile.dump.prefix = std::move(dump_prefix);

  options.run = run_options(policy);
  options.executor = policy.executor.value;
  options.compile_cache = policy.compile_cache.value;
  options.precompile_only = policy.precompile_only.value;
  return options;
}

passes::CompiledGraph compile_graph(std::unique_ptr<ir::Graph> graph,
                                    const passes::CompileOptions& options) {
  return passes::compile(std::move(graph), options);
}

std::unique_ptr<runtime::GraphExecutor> make_executor(context::Executor kind,
                                                      std::shared_ptr<const runtime::Plan> plan) {
  return kind == context::Executor::kSink ? runtime::make_sink_executor(std::move(plan))
                                          : runtime::make_kernel_executor(std::move(plan));
}

namespace {

// The executor over the compiled plan, its kernels prepared unless nothing will run.
void make_ready(CompiledNetwork& network, const DriverOptions& options) {
  network.executor = make_executor(options.executor, network.compiled.plan);
  if (!options.precompile_only) {
    const runtime::SpanTimer phase(runtime::ProfileEventKind::kPhase, "prepare kernels");
    network.prepared_kernels =
        network.executor->prepare_kernels(options.run.intra_op_threads, options.run.deterministic);
  }
}

}  // namespace

namespace {

// The hit's entry failed its first run: discard it, compile the trace, store the result.
void recompile_after_failed_hit(CompiledNetwork& network, const context::Policy& policy,
                                const std::string& reason) {
  HitRecovery& recovery = *network.recovery;
  discard_compiled(policy, recovery.lookup, reason);
  const auto start = Clock::now();
  network.compiled = passes::compile(std::move(recovery.source), recovery.options.compile);
  network.cache_note = "entry failed its first run (" + reason + "); recompiled, " +
                       store_compiled(policy, recovery.lookup, network.compiled, 0);
  network.cache_hit = false;
  network.executor = make_executor(recovery.options.executor, network.compiled.plan);
  network.prepared_kernels = network.executor->prepare_kernels(
      recovery.options.run.intra_op_threads, recovery.options.run.deterministic);
  network.compile_ms += millis_since(start);
  network.recovery.reset();
}

}  // namespace

std::unique_ptr<CompiledNetwork> compile(std::unique_ptr<ir::Graph> graph,
                                         const ir::TensorType& input, const context::Policy& policy,
                                         const context::Fingerprint& fingerprint,
                                         const DriverOptions& options,
                                         const WeightLookup& weights) {
  MF_CHECK(graph != nullptr, InvalidArgument, "compile() needs a graph");
  // Inlining flattens nested calls, so a compiled graph would run any depth: GRAPH mode refuses
  // what running op by op refuses, before anything is compiled. Recursion depends on the values;
  // the executors check it as the calls run.
  const ir::CallDepth calls = ir::call_depth(*graph);
  MF_CHECK(calls.depth <= policy.max_call_depth.value, InvalidArgument,
           "call depth exceeds max_call_depth ", policy.max_call_depth.value, " in graph @",
           echo(calls.deepest), "; raise max_call_depth or simplify the network");
  const auto start = Clock::now();
  auto network = std::make_unique<CompiledNetwork>();
  if (policy.infer_boost.value && weights)
    network->frozen_weights = freeze_weights(*graph, weights);
  network->fingerprint = fingerprint;
  network->jit_level = policy.jit_level.value;
  // The persistent cache: a hit replaces the pass pipeline by a load (stored plan proven safe).
  std::optional<CacheLookup> cached;
  if (options.compile_cache) {
    const runtime::SpanTimer phase(runtime::ProfileEventKind::kPhase, "compile cache lookup");
    cached = lookup_compiled(policy, *graph, input, fingerprint);
  }
  if (cached && cached->compiled) {
    network->compiled = std::move(*cached->compiled);
    cached->compiled.reset();
    network->cache_hit = true;
    network->cache_key = cached->key.hex;
    network->cache_note = cached->note;
    network->recovery =
        std::make_shared<HitRecovery>(HitRecovery{std::move(*cached), std::move(graph), options});
    cached.reset();
  } else {
    network->compiled = passes::compile(std::move(graph), options.compile);
    if (cached) {
      const runtime::SpanTimer phase(runtime::ProfileEventKind::kPhase, "compile cache store");
      cached->note = store_compiled(policy, *cached, network->compiled, millis_since(start));
    }
  }
  if (cached) {
    network->cache_key = cached->key.hex;
    network->cache_note = cached->note;
  }
  if (network->cache_hit) {
    // A stored entry whose kernels cannot be prepared (damaged, or forged with a valid checksum)
    // is a miss that replaces it, never an error on every run until the cache is cleared.
    try {
      make_ready(*network, options);
    } catch (const Error& e) {
      recompile_after_failed_hit(*network, policy, e.message());
    }
  } else {
    make_ready(*network, options);
  }
  network->compile_ms = millis_since(start);
  return network;
}

std::unique_ptr<CompiledNetwork> compile_planned(std::unique_ptr<ir::Graph> graph,
                                                 const context::Policy& policy,
                                                 const DriverOptions& options) {
  MF_CHECK(graph != nullptr, InvalidArgument, "compile_planned() needs a graph");
  const auto start = Clock::now();
  ir::verify(*graph);
  auto network = std::make_unique<CompiledNetwork>();
  network->jit_level = policy.jit_level.value;
  network->compiled.plan =
      std::make_shared<const runtime::Plan>(passes::plan_memory(*graph, options.compile));
  network->compiled.graph = std::move(graph);
  make_ready(*network, options);
  network->compile_ms = millis_since(start);
  return network;
}

namespace {

// The symbolic text of a cache entry parsed at `shapes`: the compiled graph at those sizes.
std::unique_ptr<ir::Graph> parse_symbolic(const SymbolicCompile& symbolic,
                                          const std::vector<ir::Shape>& shapes) {
  ir::ParseBinding binding;
  for (size_t i = 0; i < shapes.size() && i < symbolic.input_names.size(); ++i) {
    binding.input_shapes[symbolic.input_names[i]] = shapes[i];
  }
  std::unique_ptr<ir::Graph> graph =
      ir::parse_graph(symbolic.text, "compile cache entry " + symbolic.cache_key, binding);
  ir::verify(*graph);
  return graph;
}

std::string probe_text(const ir::ProbePlan& plan) {
  std::string values;
  for (const auto& [symbol, value] : plan.probe) {
    values += (values.empty() ? "" : ", ") + symbol + "=" + std::to_string(value);
  }
  return values;
}

}  // namespace

SymbolicCompile compile_symbolic(std::unique_ptr<ir::Graph> first,
                                 const std::function<std::unique_ptr<ir::Graph>()>& probe,
                                 const ir::ProbePlan& plan, std::vector<size_t> input_parameters,
                                 const context::Policy& policy,
                                 const context::Fingerprint& fingerprint,
                                 const DriverOptions& options) {
  const auto start = Clock::now();
  SymbolicCompile result;
  for (size_t index : input_parameters) {
    result.input_names.push_back(first->parameter(index)->name());
  }
  // The probe is traced (or imported) with tensors of its sizes: with many dynamic dimensions
  // their product would be more memory than the network's own calls need.
  for (const ir::Shape& shape : plan.probe_shapes) {
    const std::optional<int64_t> elements = ir::try_num_elements(shape);
    if (!elements || *elements > kMaxProbeElements) {
      result.why_not = "the probe sizes " + ir::shape_to_string(shape) +
                       " would hold more than 2^26 elements (too many dynamic dimensions to probe)";
      result.dump_files = passes::compile(std::move(first), options.compile).dump_files;
      result.compile_ms = millis_since(start);
      return result;
    }
  }
  std::unique_ptr<ir::Graph> probe_source;
  std::optional<CacheLookup> cached;
  try {
    probe_source = probe();
  } catch (const Error& e) {
    result.why_not = "the probe sizes " + ir::signature_to_string(plan.inputs) + " at " +
                     probe_text(plan) + " do not compile: " + e.message();
  } catch (const std::exception& e) {
    // A front end's own exception from tracing at the probe sizes (a Python construct's error).
    result.why_not = "the probe sizes " + ir::signature_to_string(plan.inputs) + " at " +
                     probe_text(plan) + " do not trace: " + echo(e.what(), 300);
  }
  if (probe_source && options.compile_cache) {
    const runtime::SpanTimer phase(runtime::ProfileEventKind::kPhase, "compile cache lookup");
    const ir::TensorType input =
        probe_source->num_parameters() > 0 ? probe_source->parameter(0)->type() : ir::TensorType{};
    cached = lookup_compiled(policy, *probe_source, input, fingerprint,
                             ir::signature_to_string(plan.inputs));
    result.cache_key = cached->key.hex;
    result.cache_note = cached->note;
    if (cached->compiled && !cached->compiled->symbolic_text.empty()) {
      // Trusted only when its text, parsed at the probe's sizes, is the graph stored beside it.
      result.text = cached->compiled->symbolic_text;
      std::string difference;
      try {
        difference = ir::first_type_difference(*parse_symbolic(result, plan.probe_shapes),
                                               *cached->compiled->graph);
      } catch (const Error& e) {
        difference = e.message();
      }
      if (difference.empty()) {
        result.cache_hit = true;
        result.compile_ms = millis_since(start);
        return result;
      }
      result.text.clear();
      discard_compiled(policy, *cached, "its symbolic text is not its graph: " + difference);
      cached->note = "entry discarded (its symbolic text is not its graph); compiled";
    }
  }
  passes::CompileOptions quiet = options.compile;  // the dumps are the first binding's
  quiet.dump.level = 0;
  passes::CompiledGraph first_compiled = passes::compile(std::move(first), options.compile);
  result.dump_files = first_compiled.dump_files;
  if (probe_source) {
    try {
      passes::CompiledGraph probe_compiled = passes::compile(std::move(probe_source), quiet);
      std::variant<ir::SymbolicGraph, std::string> generalized =
          ir::generalize(std::move(first_compiled.graph), plan.first, *probe_compiled.graph,
                         plan.probe, plan.inputs, std::move(input_parameters));
      if (auto* why = std::get_if<std::string>(&generalized)) {
        result.why_not = std::move(*why);
      } else {
        result.graph = std::make_shared<const ir::SymbolicGraph>(
            std::move(std::get<ir::SymbolicGraph>(generalized)));
        if (cached) {
          probe_compiled.symbolic_text = result.graph->text;
          result.cache_note = store_compiled(policy, *cached, probe_compiled, millis_since(start));
        }
      }
    } catch (const Error& e) {
      result.why_not = "the probe sizes " + ir::signature_to_string(plan.inputs) + " at " +
                       probe_text(plan) + " do not compile: " + e.message();
    }
  }
  if (result.graph && options.compile.dump.level > 0) {
    const std::filesystem::path file =
        options.compile.dump.dir / (options.compile.dump.prefix + "_symbolic.ir");
    std::error_code ec;
    std::filesystem::create_directories(options.compile.dump.dir, ec);
    std::ofstream out(file);
    out << result.graph->text;
    MF_CHECK(out.good(), InvalidArgument, "cannot write the symbolic graph to '",
             echo(file.string()), "'");
    result.dump_files.push_back(file);
  }
  result.compile_ms = millis_since(start);
  return result;
}

std::unique_ptr<CompiledNetwork> bind_symbolic(const SymbolicCompile& symbolic,
                                               const std::vector<ir::Shape>& shapes,
                                               const context::Policy& policy,
                                               const context::Fingerprint& fingerprint,
                                               const DriverOptions& options) {
  MF_CHECK(symbolic.usable(), Internal, "bind_symbolic: no symbolic graph");
  const auto start = Clock::now();
  std::unique_ptr<ir::Graph> graph =
      symbolic.graph ? ir::specialize(*symbolic.graph, shapes) : parse_symbolic(symbolic, shapes);
  std::unique_ptr<CompiledNetwork> network = compile_planned(std::move(graph), policy, options);
  network->fingerprint = fingerprint;
  network->cache_hit = symbolic.cache_hit;
  network->cache_key = symbolic.cache_key;
  network->cache_note = symbolic.cache_note;
  network->compile_ms = millis_since(start);
  return network;
}

std::vector<runtime::TensorArg> run(CompiledNetwork& network,
                                    std::span<const runtime::TensorArg> inputs,
                                    const context::Policy& policy,
                                    const context::Snapshot& snapshot, std::string_view what) {
  const auto attempt = [&] {
    runtime::RunOptions options = run_options(policy);
    Recorder recorder(policy, snapshot, *network.compiled.graph);
    options.on_step = recorder.step_callback();
    std::vector<runtime::TensorArg> outputs;
    try {
      outputs = network.executor->run(inputs, options);
    } catch (Error& e) {
      if (network.recovery) throw;  // the caller compiles instead and tries once more
      recorder.on_failure(e);
      if (policy.debug_level.value == context::DebugLevel::kDebug) {
        // Beside the Running Data Recorder's report when it wrote one, else in save_graphs_path.
        const std::filesystem::path dir = !recorder.report_file().empty()
                                              ? recorder.report_file().parent_path()
                                              : std::filesystem::path(policy.dump_dir.value);
        const std::filesystem::path file = passes::write_failing_graph(
            *network.compiled.graph, dir, "failed_" + network.compiled.graph->name());
        if (!file.empty()) e.add_context("the failing graph is in " + file.string());
      }
      e.add_context("while running " + std::string(what) + " in " +
                    std::string(context::to_string(policy.mode.value)) + " (jit_level " +
                    std::string(context::to_string(network.jit_level)) + ", " +
                    std::string(network.executor->name()) + ")");
      throw;
    }
    recorder.on_success();
    // A variable written in place (a moving statistic): what kernels derived from the bytes of
    // the bound inputs, keyed by their version, is stale.
    if (network.writes_inputs < 0) {
      network.writes_inputs = ir::writes_inputs(*network.compiled.graph) ? 1 : 0;
    }
    if (network.writes_inputs == 1) {
      for (const runtime::TensorArg& input : inputs) {
        if (input.buffer) input.buffer->mark_written();
      }
    }
    return outputs;
  };
  if (!network.recovery) return attempt();
  try {
    std::vector<runtime::TensorArg> outputs = attempt();
    network.recovery.reset();  // the entry ran: nothing to fall back on any more
    return outputs;
  } catch (const Error& e) {
    recompile_after_failed_hit(network, policy, e.message());
  }
  return attempt();
}

}  // namespace mf::engine
