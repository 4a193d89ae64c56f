#include "engine/graph_mode.h"

#include <atomic>
#include <chrono>

#include "base/logging.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/engine_state.h"
#include "engine/nn/cell.h"
#include "engine/recorder.h"

namespace mf::engine {
namespace {

using Clock = std::chrono::steady_clock;
double millis_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

passes::JitLevel to_passes(context::JitLevel level) {
  switch (level) {
    case context::JitLevel::kO0:
      return passes::JitLevel::kO0;
    case context::JitLevel::kO1:
      return passes::JitLevel::kO1;
    case context::JitLevel::kO2:
      return passes::JitLevel::kO2;
  }
  return passes::JitLevel::kO0;
}

// Why no cached form fits: the input that changed, or the compile settings that did.
std::string recompile_reason(const CompiledCache& cache, const ir::TensorType& input,
                             const context::Fingerprint& fingerprint) {
  if (cache.entries.empty()) return {};
  const CompiledNetwork& last = *cache.entries.back();
  if (!(last.input_type == input)) {
    return "input x changed from " + ir::type_to_string(last.input_type) + " to " +
           ir::type_to_string(input);
  }
  std::string changed;
  for (const auto& name : context::differing_components(last.fingerprint, fingerprint)) {
    changed += (changed.empty() ? "" : ", ") + name;
  }
  return "compile settings changed: " + changed;
}

std::unique_ptr<CompiledNetwork> compile_network(nn::Cell& cell, const Tensor& x,
                                                 const context::Policy& policy,
                                                 const context::Fingerprint& fingerprint) {
  static std::atomic<int> compile_counter{0};
  auto network = std::make_unique<CompiledNetwork>();
  network->input_type = x.type();
  network->fingerprint = fingerprint;
  network->jit_level = policy.jit_level.value;

  auto start = Clock::now();
  TraceResult trace =
      Tracer::trace(cell, x, policy.max_call_depth.value, policy.reserve_class_name_in_scope.value);
  network->trace_ms = millis_since(start);
  network->bindings = std::move(trace.bindings);

  start = Clock::now();
  const std::string prefix = trace.graph->name() + "_" + std::to_string(++compile_counter);
  const passes::CompileOptions options = compile_options_from(policy, prefix);
  // The persistent cache: a hit replaces the pass pipeline by a load (stored plan proven safe).
  std::optional<CacheLookup> cached;
  if (policy.compile_cache.value) {
    cached = lookup_compiled(policy, *trace.graph, x.type(), fingerprint);
  }
  if (cached && cached->compiled) {
    network->compiled = std::move(*cached->compiled);
    network->cache_hit = true;
  } else {
    network->compiled = passes::compile(std::move(trace.graph), options);
    if (cached) {
      cached->note = store_compiled(policy, *cached, network->compiled, millis_since(start));
    }
  }
  if (cached) {
    network->cache_key = cached->key.hex;
    network->cache_note = cached->note;
  }
  network->executor = policy.jit_level.value == context::JitLevel::kO2
                          ? runtime::make_sink_executor(network->compiled.plan)
                          : runtime::make_kernel_executor(network->compiled.plan);
  network->compile_ms = millis_since(start);
  return network;
}

}  // namespace

passes::CompileOptions compile_options_from(const context::Policy& policy,
                                            std::string dump_prefix) {
  passes::CompileOptions options;
  options.jit_level = to_passes(policy.jit_level.value);
  options.fusion_level = policy.fusion_level.value;
  const context::GraphKernelFlags& flags = policy.fusion_flags;
  options.fusion.dump_as_text = flags.dump_as_text;
  options.fusion.enable_expand_ops = flags.enable_expand_ops;
  options.fusion.enable_expand_ops_only = flags.enable_expand_ops_only;
  options.fusion.disable_expand_ops = flags.disable_expand_ops;
  options.fusion.enable_cluster_ops = flags.enable_cluster_ops;
  options.fusion.enable_cluster_ops_only = flags.enable_cluster_ops_only;
  options.fusion.disable_cluster_ops = flags.disable_cluster_ops;
  options.fusion.stitch = policy.stitch_fusion.value;
  options.fusion.parallel = policy.parallel_fusion.value;
  options.fusion.recompute = policy.recompute_fusion.value;
  options.fusion.reduce_fuse_depth = flags.reduce_fuse_depth;
  if (flags.composite_op_limit_size) {
    options.fusion.composite_op_limit_size = *flags.composite_op_limit_size;
  }
  options.enable_passes = policy.fusion_flags.enable_pass;
  options.disable_passes = policy.fusion_flags.disable_pass;
  options.verify_every_pass = policy.debug_level.value == context::DebugLevel::kDebug;
  options.memory_level = policy.memory_optimize_level.value == context::MemoryOptimizeLevel::kO1
                             ? passes::MemoryLevel::kO1
                             : passes::MemoryLevel::kO0;
  options.memory_reuse = policy.memory_reuse.value;
  options.deterministic = policy.deterministic.value;
  options.dump.level = policy.dump_level.value;
  options.dump.dir = policy.dump_dir.value;
  options.dump.prefix = std::move(dump_prefix);
  return options;
}

Tensor run_graph_mode(nn::Cell& cell, const Tensor& x, CompiledCache& cache,
                      std::optional<context::JitLevel> network_jit_level) {
  current_policy();  // applies memory limits and print routing of the global context
  const context::Snapshot snapshot = context::snapshot();
  if (!cache.derived || cache.derived->context_version != snapshot.version() ||
      cache.derived->network_jit_level != network_jit_level) {
    context::Policy policy_now = context::derive_policy(snapshot, network_jit_level);
    context::Fingerprint fingerprint_now = context::fingerprint(snapshot, policy_now);
    cache.derived = std::make_shared<const DerivedPolicy>(DerivedPolicy{
        snapshot.version(), network_jit_level, std::move(policy_now), std::move(fingerprint_now)});
  }
  // Held here: the cell's cache may be re-derived while this call runs (a nested call of it).
  const std::shared_ptr<const DerivedPolicy> derived = cache.derived;
  const context::Policy& policy = derived->policy;
  const context::Fingerprint& fingerprint = derived->fingerprint;
  GraphRunReport report;

  CompiledNetwork* network = nullptr;
  if (cache.last_network != nullptr && cache.last_network_derived == derived &&
      cache.last_network->input_type == x.type()) {
    network = cache.last_network;
  } else {
    for (auto& entry : cache.entries) {
      if (entry->input_type == x.type() && entry->fingerprint == fingerprint) network = entry.get();
    }
  }
  if (network == nullptr) {
    report.recompile_reason = recompile_reason(cache, x.type(), fingerprint);
    if (!report.recompile_reason.empty()) {
      log::info("recompiling {}: {}", cell.class_name(), report.recompile_reason);
    }
    cache.entries.push_back(compile_network(cell, x, policy, fingerprint));
    network = cache.entries.back().get();
    report.compiled = true;
    report.trace_ms = network->trace_ms;
    report.compile_ms = network->compile_ms;
    report.dump_files = network->compiled.dump_files;
    report.cache_hit = network->cache_hit;
    report.cache_key = network->cache_key;
    report.cache_note = network->cache_note;
    log::info("compiled {} at jit_level {} in {:.3g} ms (trace {:.3g} ms)", cell.class_name(),
              context::to_string(network->jit_level), network->compile_ms, network->trace_ms);
  }
  cache.last_network = network;
  cache.last_network_derived = derived;
  report.planned_peak_bytes = network->compiled.plan->planned_peak_bytes;
  report.executor = std::string(network->executor->name());
  if (policy.precompile_only.value) {
    log::info("precompile_only: {} compiled, not run", cell.class_name());
    cache.last_report = std::move(report);
    return Tensor();
  }

  runtime::RunOptions options;
  options.intra_op_threads = policy.intra_op_threads.value;
  options.inter_op_parallelism = policy.inter_op_parallelism.value;
  options.deterministic = policy.deterministic.value;
  options.max_call_depth = policy.max_call_depth.value;
  Recorder recorder(policy, snapshot, *network->compiled.graph);
  options.on_step = recorder.step_callback();

  const auto start = Clock::now();
  std::vector<runtime::TensorArg> outputs;
  try {
    outputs = network->executor->run(bind_inputs(cell, network->bindings, x), options);
  } catch (Error& e) {
    recorder.on_failure(e);
    e.add_context("while running " + cell.class_name() + " in GRAPH_MODE (jit_level " +
                  std::string(context::to_string(network->jit_level)) + ")");
    throw;
  }
  recorder.on_success();
  report.run_ms = millis_since(start);
  report.ran = true;
  cache.last_report = std::move(report);

  MF_CHECK(outputs.size() == 1, Internal, "compiled ", cell.class_name(), " returned ",
           outputs.size(), " outputs");
  auto impl = std::make_shared<TensorImpl>();
  impl->type = outputs[0].type;
  impl->buffer = std::move(outputs[0].buffer);
  return Tensor(impl);
}

}  // namespace mf::engine
