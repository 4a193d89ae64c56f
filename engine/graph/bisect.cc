#include "engine/graph/bisect.h"

#include <cmath>
#include <limits>

#include "base/error.h"
#include "context/context.h"
#include "context/policy.h"
#include "engine/engine_state.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "engine/nn/cell.h"
#include "ir/verifier.h"
#include "passes/plan_memory.h"

namespace mf::engine {
namespace {

// The op of a graph-kernel fusion (runtime/fused_kernel.cc): a body subgraph named by its "graph"
// attribute, evaluated as one kernel. Unfusing one turns it into a `call` of the same body.
constexpr std::string_view kFusedOp = "fused";

// The fused kernels of a graph tree in a fixed order (program order, the graph before its
// subgraphs), so the k-th of a clone is the k-th of the original.
void find_fused(ir::Graph& graph, std::vector<std::pair<ir::Graph*, ir::Node*>>& out) {
  for (ir::Node& node : graph.nodes()) {
    if (node.op() == kFusedOp) out.emplace_back(&graph, &node);
  }
  for (ir::Graph* sub : graph.subgraphs()) find_fused(*sub, out);
}

std::string describe_fused(const ir::Graph& owner, const ir::Node& node) {
  std::string body;
  if (const auto it = node.attrs().find("graph"); it != node.attrs().end()) {
    if (const auto* name = std::get_if<std::string>(&it->second)) body = " @" + *name;
  }
  return owner.name() + "/%" + std::to_string(node.id()) + " " + node.op() + body;
}

// Runs a compiled form of the cell's trace on x and returns its single output.
Tensor execute(nn::Cell& cell, const Tensor& x, const TraceResult& trace,
               const context::Policy& policy, CompiledNetwork& network) {
  std::vector<runtime::TensorArg> outputs =
      run(network, bind_inputs(cell, trace.bindings, x), policy, context::snapshot(), "bisect");
  MF_CHECK(outputs.size() == 1, Internal, "bisect expects one output, the compiled graph returned ",
           outputs.size());
  return tensor_of(std::move(outputs[0]));
}

// Runs the fully compiled graph with its k-th fused kernel replaced by a call of the same body.
Tensor run_unfused(nn::Cell& cell, const Tensor& x, const TraceResult& trace,
                   const context::Policy& policy, const DriverOptions& options,
                   const ir::Graph& compiled, size_t k) {
  std::unique_ptr<ir::Graph> graph = compiled.clone();
  std::vector<std::pair<ir::Graph*, ir::Node*>> fused;
  find_fused(*graph, fused);
  MF_CHECK(k < fused.size(), Internal, "fused kernel ", k, " vanished from the clone");
  auto [owner, node] = fused[k];
  const auto body = node->attrs().find("graph");
  MF_CHECK(body != node->attrs().end(), Internal, "fused node has no 'graph' attribute");
  std::vector<ir::TensorType> types;
  for (size_t i = 0; i < node->num_outputs(); ++i) types.push_back(node->output_type(i));
  ir::Node* call = owner->create_node(
      node, "call", std::vector<ir::Value>(node->inputs().begin(), node->inputs().end()),
      ir::Attrs{{"graph", body->second}}, types, node->info());
  for (size_t i = 0; i < node->num_outputs(); ++i) {
    owner->replace_all_uses(node->output(i), call->output(i));
  }
  owner->erase_node(node);
  // No pass runs again: the graph is the compiled one with one node replaced.
  const std::unique_ptr<CompiledNetwork> network =
      compile_planned(std::move(graph), policy, options);
  return execute(cell, x, trace, policy, *network);
}

// Compiles `graph` with the pipeline cut after `passes_run` pass runs, runs it on x and returns
// its single output.
Tensor run_cut(nn::Cell& cell, const Tensor& x, const TraceResult& trace,
               const context::Policy& policy, const context::Fingerprint& fingerprint,
               DriverOptions options, size_t passes_run) {
  options.compile.stop_after_pass = passes_run;
  const std::unique_ptr<CompiledNetwork> network =
      compile(trace.graph->clone(), x.type(), policy, fingerprint, options);
  return execute(cell, x, trace, policy, *network);
}

}  // namespace

Comparison compare_outputs(const Tensor& reference, const Tensor& value, double tolerance) {
  Comparison c;
  if (!(reference.shape() == value.shape())) {
    c.diverged = true;
    c.max_abs_diff = std::numeric_limits<double>::infinity();
    c.note = "shape " + ir::shape_to_string(value.shape()) + " where the reference has " +
             ir::shape_to_string(reference.shape());
    return c;
  }
  const std::vector<double> ref = reference.to_doubles();
  const std::vector<double> got = value.to_doubles();
  double worst_scaled = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], v = got[i];
    double diff = 0, scaled = 0;
    if (std::isnan(r) || std::isnan(v)) {
      if (std::isnan(r) && std::isnan(v)) continue;
      diff = scaled = std::numeric_limits<double>::infinity();
    } else if (r != v) {  // also equal infinities
      diff = std::abs(v - r);
      scaled = diff / std::max(1.0, std::abs(r));
    }
    c.max_abs_diff = std::max(c.max_abs_diff, diff);
    if (scaled > worst_scaled) {
      worst_scaled = scaled;
      c.worst_index = int64_t(i);
      c.reference = r;
      c.value = v;
    }
  }
  c.diverged = worst_scaled > tolerance;
  if (c.diverged && std::isnan(c.value) != std::isnan(c.reference)) {
    c.note = "NaN on one side only";
  }
  return c;
}

BisectReport bisect(nn::Cell& cell, const Tensor& x, const BisectOptions& options) {
  MF_CHECK(options.tolerance >= 0 && std::isfinite(options.tolerance), InvalidArgument,
           "bisect: the tolerance must be a finite number >= 0, got ", options.tolerance);
  BisectReport report;
  report.network = cell.class_name();
  report.tolerance = options.tolerance;

  // The reference: op by op, whatever the context's mode (the context is left as it is).
  current_policy();  // applies memory limits and threads of the context
  Tensor reference;
  {
    OpByOpScope op_by_op;
    reference = cell(x);
  }
  reference.sync();

  // The cuts: compiled as GRAPH mode would compile the cell, under the context's settings.
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(
      snapshot, context::DeriveOptions{.network_jit_level = cell.jit_level(), .jit_region = true});
  const context::Fingerprint fingerprint = context::fingerprint(snapshot, policy);
  report.jit_level = std::string(context::to_string(policy.jit_level.value));
  report.fusion_level = policy.fusion_level.value;
  const TraceResult trace =
      Tracer::trace(cell, x, policy.max_call_depth.value, policy.reserve_class_name_in_scope.value);

  DriverOptions compile_options = driver_options(policy, "bisect");
  compile_options.compile.dump.level = 0;  // one compile per cut: dumps would multiply
  compile_options.compile_cache = false;   // every cut compiles; none is worth keeping
  compile_options.compile.extra_passes = options.extra_passes;

  // The full pipeline once, for the names of its pass runs and its fused kernels.
  const std::unique_ptr<CompiledNetwork> full_network =
      compile(trace.graph->clone(), x.type(), policy, fingerprint, compile_options);
  const passes::CompiledGraph& full = full_network->compiled;
  for (const passes::PassRecord& record : full.passes) {
    if (record.name != "plan-memory") report.pipeline.push_back(record.name);
  }
  for (size_t k = 0; k <= report.pipeline.size(); ++k) {
    BisectCut cut;
    cut.passes_run = k;
    cut.after_pass = k == 0 ? "" : report.pipeline[k - 1];
    try {
      const Tensor y = run_cut(cell, x, trace, policy, fingerprint, compile_options, k);
      cut.comparison = compare_outputs(reference, y, options.tolerance);
      if (std::isfinite(cut.comparison.max_abs_diff)) {
        report.max_abs_diff = std::max(report.max_abs_diff, cut.comparison.max_abs_diff);
      }
    } catch (const Error& e) {
      cut.error = e.what();
    }
    report.cuts.push_back(cut);
    if (options.on_cut) options.on_cut(report.cuts.back());
    if (!cut.error.empty() && !report.first_error) report.first_error = report.cuts.size() - 1;
    if (cut.comparison.diverged && !report.first_divergence) {
      report.first_divergence = report.cuts.size() - 1;
      if (options.stop_at_first) break;
    }
  }

  // Each fused kernel unfused in turn, against the fully compiled run.
  std::vector<std::pair<ir::Graph*, ir::Node*>> fused;
  find_fused(*full.graph, fused);
  if (fused.empty()) return report;
  Tensor fused_output;
  try {
    fused_output = execute(cell, x, trace, policy, *full_network);
  } catch (const Error&) {
    // The full pipeline does not run: the cuts report that; unfusing cannot be compared.
    for (const auto& [owner, node] : fused) {
      report.fused_kernels.push_back(describe_fused(*owner, *node));
    }
    return report;
  }
  for (size_t k = 0; k < fused.size(); ++k) {
    UnfusedCheck check;
    check.kernel = describe_fused(*fused[k].first, *fused[k].second);
    report.fused_kernels.push_back(check.kernel);
    try {
      const Tensor y = run_unfused(cell, x, trace, policy, compile_options, *full.graph, k);
      check.vs_fused = compare_outputs(y, fused_output, options.tolerance);
      check.vs_reference = compare_outputs(reference, y, options.tolerance);
    } catch (const Error& e) {
      check.error = e.what();
    }
    report.unfused.push_back(check);
    if (check.vs_fused.diverged && !report.first_divergent_kernel) {
      report.first_divergent_kernel = report.unfused.size() - 1;
      if (options.stop_at_first) break;
    }
  }
  return report;
}

BisectReport bisect(const models::NetSpec& spec, const BisectOptions& options) {
  std::unique_ptr<nn::Cell> cell = spec.make(options.seed);
  const Tensor x = spec.make_input(options.seed);
  BisectReport report = bisect(*cell, x, options);
  report.network = spec.name;
  return report;
}

}  // namespace mf::engine
