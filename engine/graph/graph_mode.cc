#include "engine/graph/graph_mode.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "base/logging.h"
#include "engine/eager/eager_layout.h"
#include "engine/engine_state.h"
#include "engine/nn/cell.h"
#include "engine/scope.h"
#include "runtime/eager_executor.h"
#include "runtime/profiler.h"

namespace mf::engine {
namespace {

using Clock = std::chrono::steady_clock;
double millis_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Why no held form fits: the input that changed, or the compile settings that did.
std::string recompile_reason(const CompiledForms& forms, const nn::Cell& cell,
                             const ir::TensorType& input, const context::Fingerprint& fingerprint) {
  if (forms.entries.empty()) return {};
  const CompiledCell& last = *forms.entries.back();
  if (!(last.input_type == input)) {
    return "input x changed from " + ir::type_to_string(last.input_type) + " to " +
           ir::type_to_string(input);
  }
  const std::vector<ir::TensorType>& traced = last.weight_types.extra_inputs;
  const std::span<const Tensor> extra = cell.extra_inputs();
  if (traced.size() != extra.size()) {
    return "the call has " + std::to_string(extra.size() + 1) + " inputs, not " +
           std::to_string(traced.size() + 1);
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    if (!(extra[i].type() == traced[i])) {
      return "input " + std::to_string(i + 1) + " changed from " + ir::type_to_string(traced[i]) +
             " to " + ir::type_to_string(extra[i].type());
    }
  }
  std::string changed;
  for (const auto& name : context::differing_components(last.network->fingerprint, fingerprint)) {
    changed += (changed.empty() ? "" : ", ") + name;
  }
  if (changed.empty()) return "infer_boost: a weight compiled in as a constant was replaced";
  return "compile settings changed: " + changed;
}

std::unique_ptr<CompiledCell> trace_and_compile(nn::Cell& cell, const Tensor& x,
                                                const DerivedPolicy& derived) {
  static std::atomic<int> compile_counter{0};
  const context::Policy& policy = derived.policy;
  auto form = std::make_unique<CompiledCell>();
  form->input_type = x.type();
  const auto start = Clock::now();
  std::optional<runtime::SpanTimer> phase(std::in_place, runtime::ProfileEventKind::kPhase,
                                          "trace");
  TraceResult trace =
      Tracer::trace(cell, x, policy.max_call_depth.value, policy.reserve_class_name_in_scope.value);
  phase.reset();
  form->trace_ms = millis_since(start);
  form->bindings = std::move(trace.bindings);
  form->weight_types.record(cell, form->bindings);
  const std::string prefix = trace.graph->name() + "_" + std::to_string(++compile_counter);
  // infer_boost: the weights' current tensors, looked up once, become constants.
  std::vector<Tensor> bound;
  const WeightLookup weight_of = [&](const ir::Parameter& p) -> Tensor {
    if (p.index() >= form->bindings.size() ||
        form->bindings[p.index()].kind != Binding::Kind::kWeight) {
      return {};
    }
    if (bound.empty()) bound = bound_tensors(cell, form->bindings, x);
    return bound[p.index()];
  };
  form->network = compile(std::move(trace.graph), x.type(), policy, derived.fingerprint,
                          driver_options(policy, prefix), weight_of);
  return form;
}

// A cell with a declared dynamic input: the form for x bound from the symbolic compile of these
// settings (traced at x and at a probe, compiled once); null when the trace does not generalize
// (then x's size compiles on its own, as without a declaration).
CompiledCell* bind_dynamic(nn::Cell& cell, const Tensor& x, CompiledForms& forms,
                           const DerivedPolicy& derived, GraphRunReport& report) {
  static std::atomic<int> compile_counter{0};
  const context::Policy& policy = derived.policy;
  std::vector<ir::InputSignature> declared = {*cell.declared_input()};
  std::vector<Shape> shapes = {x.shape()};
  for (size_t i = 0; i < cell.declared_extra_inputs().size(); ++i) {
    declared.push_back(cell.declared_extra_inputs()[i]);
    shapes.push_back(cell.extra_inputs()[i].shape());
  }
  if (!policy.symbolic_compile.value) {
    report.dynamic_note = "compiled per size: " + policy.symbolic_compile.reason;
    return nullptr;
  }
  auto entry = std::find_if(forms.symbolic.begin(), forms.symbolic.end(),
                            [&](const auto& s) { return s.fingerprint == derived.fingerprint; });
  if (entry == forms.symbolic.end()) {
    const auto start = Clock::now();
    const ir::ProbePlan plan = ir::plan_probe(declared, shapes);
    TraceResult first = Tracer::trace(cell, x, policy.max_call_depth.value,
                                      policy.reserve_class_name_in_scope.value);
    const double trace_ms = millis_since(start);
    // The graph parameters of x and of each declared extra input, in declaration order.
    std::vector<size_t> input_parameters(declared.size(), first.bindings.size());
    for (size_t p = 0; p < first.bindings.size(); ++p) {
      const Binding& b = first.bindings[p];
      if (b.kind == Binding::Kind::kInput) input_parameters[0] = p;
      if (b.kind == Binding::Kind::kExtraInput && b.extra_index + 1 < declared.size()) {
        input_parameters[b.extra_index + 1] = p;
      }
    }
    for (size_t p : input_parameters) {
      MF_CHECK(p < first.bindings.size(), Internal, "the trace of ", cell.class_name(),
               " lacks a declared input's parameter");
    }
    const std::string prefix = first.graph->name() + "_" + std::to_string(++compile_counter);
    const auto probe = [&] {
      std::vector<Tensor> extra;
      for (size_t i = 1; i < declared.size(); ++i) {
        extra.push_back(Tensor::zeros(plan.probe_shapes[i], cell.extra_inputs()[i - 1].dtype()));
      }
      const nn::Cell::ExtraInputsScope probe_inputs(cell, std::move(extra));
      return Tracer::trace(cell, Tensor::zeros(plan.probe_shapes[0], x.dtype()),
                           policy.max_call_depth.value, policy.reserve_class_name_in_scope.value)
          .graph;
    };
    SymbolicCompile compile =
        compile_symbolic(std::move(first.graph), probe, plan, input_parameters, policy,
                         derived.fingerprint, driver_options(policy, prefix));
    forms.symbolic.push_back(
        {derived.fingerprint, std::move(compile), std::move(first.bindings), trace_ms});
    entry = std::prev(forms.symbolic.end());
    report.compiled = true;
    report.trace_ms = trace_ms;
    log::info("compiled {} once for its dynamic input {}: {}", cell.class_name(),
              ir::symbolic_shape_to_string(declared.front().shape),
              entry->compile.usable() ? "one compile serves every size" : entry->compile.why_not);
  }
  if (!entry->compile.usable()) {
    report.dynamic_note = "compiled per size: " + entry->compile.why_not;
    report.compiled = false;  // the size's own compile follows
    return nullptr;
  }
  auto form = std::make_unique<CompiledCell>();
  form->input_type = x.type();
  form->bindings = entry->bindings;
  form->weight_types.record(cell, form->bindings);
  form->trace_ms = report.compiled ? entry->trace_ms : 0;
  std::unique_ptr<CompiledNetwork> network = bind_symbolic(
      entry->compile, shapes, policy, derived.fingerprint, driver_options(policy, "bind"));
  if (report.compiled) {
    network->compiled.dump_files = entry->compile.dump_files;
    network->compile_ms += entry->compile.compile_ms;
  }
  form->network = std::move(network);
  report.specialized = true;
  report.dynamic_note = "one compile serves every size";
  forms.entries.push_back(std::move(form));
  if (forms.entries.size() > CompiledForms::kDynamicForms)
    forms.entries.erase(forms.entries.begin());
  report.prepared_shapes = forms.entries.size();
  return forms.entries.back().get();
}

// A symbolic compile serves the call: its inputs are all declared, at least one dynamically.
bool declares_dynamic_inputs(const nn::Cell& cell) {
  if (!cell.declared_input() || cell.declared_extra_inputs().size() != cell.extra_inputs().size()) {
    return false;
  }
  bool dynamic = ir::is_dynamic(cell.declared_input()->shape);
  for (const ir::InputSignature& s : cell.declared_extra_inputs()) {
    dynamic = dynamic || ir::is_dynamic(s.shape);
  }
  return dynamic;
}

// Whether a form compiled with its weights frozen in (infer_boost) still has them: a cell whose
// parameter was replaced since needs another compile.
bool weights_unchanged(nn::Cell& cell, const Tensor& x, CompiledCell& form) {
  if (!form.weight_types.still_fit(cell, form.bindings)) return false;
  const FrozenWeights& frozen = form.network->frozen_weights;
  if (frozen.tensors.empty()) return true;
  const std::vector<Tensor> bound = bound_tensors(cell, form.bindings, x);
  std::vector<Tensor> weights;
  for (size_t i = 0; i < form.bindings.size(); ++i) {
    if (form.bindings[i].kind == Binding::Kind::kWeight) weights.push_back(bound[i]);
  }
  return frozen.same_as(weights);
}

// The form for x under `derived`: the last one run, a held one, or a new compile.
CompiledCell& find_or_compile(nn::Cell& cell, const Tensor& x, CompiledForms& forms,
                              const std::shared_ptr<const DerivedPolicy>& derived,
                              GraphRunReport& report) {
  CompiledCell* form = nullptr;
  if (forms.last_entry != nullptr && forms.last_entry_derived == derived &&
      forms.last_entry->input_type == x.type() && weights_unchanged(cell, x, *forms.last_entry)) {
    form = forms.last_entry;
  } else {
    for (auto& entry : forms.entries) {
      if (entry->input_type == x.type() && entry->network->fingerprint == derived->fingerprint &&
          weights_unchanged(cell, x, *entry)) {
        form = entry.get();
      }
    }
  }
  // A call with inputs set_inputs did not declare compiles per size.
  if (form == nullptr && declares_dynamic_inputs(cell)) {
    form = bind_dynamic(cell, x, forms, *derived, report);
  }
  if (form == nullptr) {
    report.recompile_reason = recompile_reason(forms, cell, x.type(), derived->fingerprint);

    if (!report.recompile_reason.empty()) {
      log::info("recompiling {}: {}", cell.class_name(), report.recompile_reason);
    }
    forms.entries.push_back(trace_and_compile(cell, x, *derived));
    form = forms.entries.back().get();
    const CompiledNetwork& network = *form->network;
    report.compiled = true;
    report.trace_ms = form->trace_ms;
    log::info("compiled {} at jit_level {} in {:.3g} ms (trace {:.3g} ms)", cell.class_name(),
              context::to_string(network.jit_level), network.compile_ms, form->trace_ms);
  }
  forms.last_entry = form;
  forms.last_entry_derived = derived;
  describe_network(*form->network, derived->policy, report.compiled, report);
  return *form;
}

Tensor wrap_output(std::vector<runtime::TensorArg> outputs, const std::string& what) {
  MF_CHECK(outputs.size() == 1, Internal, "compiled ", what, " returned ", outputs.size(),
           " outputs");
  return tensor_of(std::move(outputs[0]));
}

// PYNATIVE: the compiled run is one task of the eager queue. Its inputs are taken as the tensors
// they are now (no wait: every task producing them is ahead in the queue), its output is a tensor
// whose buffer the task sets, so eager code before and after keeps its order and asynchrony.
Tensor submit_compiled(nn::Cell& cell, const Tensor& x, CompiledCell& form,
                       std::shared_ptr<const DerivedPolicy> derived, std::source_location where,
                       GraphRunReport& report) {
  std::vector<Tensor> bound = bound_tensors(cell, form.bindings, x);
  // The compiled graph reads NCHW: channels-last eager tensors are copied first, in queue order.
  for (Tensor& t : bound) t = plain_tensor(t, where);
  const ir::Graph& graph = *form.network->compiled.graph;
  MF_CHECK(graph.outputs().size() == 1, Internal, "compiled ", cell.class_name(), " returns ",
           graph.outputs().size(), " outputs");
  auto out = std::make_shared<TensorImpl>();
  out->type = graph.outputs()[0].type();
  const std::string what = "jit-compiled " + cell.class_name();
  auto task = [network = form.network, derived, snapshot = context::snapshot(),
               bound = std::move(bound), out, what] {
    std::vector<runtime::TensorArg> inputs;
    inputs.reserve(bound.size());
    for (const Tensor& t : bound) inputs.push_back({t.type(), t.impl()->buffer});
    std::vector<runtime::TensorArg> results =
        run(*network, inputs, derived->policy, snapshot, what);
    out->buffer = std::move(results.at(0).buffer);
  };
  const auto start = Clock::now();
  auto& executor = runtime::default_eager_executor();
  const bool inline_run = executor.synchronous();
  out->ready_seq = executor.submit(
      std::move(task), runtime::TaskInfo{"jit(" + cell.class_name() + ")", current_scope(), where});
  if (inline_run) report.run_ms = millis_since(start);
  report.ran = true;
  return Tensor(out);
}

}  // namespace

std::shared_ptr<const DerivedPolicy> derive_policy(
    std::shared_ptr<const DerivedPolicy>& held, std::optional<context::JitLevel> network_jit_level,
    bool jit_region) {
  const context::Snapshot snapshot = context::snapshot();
  if (!held || held->context_version != snapshot.version() ||
      held->network_jit_level != network_jit_level) {
    context::Policy policy = context::derive_policy(
        snapshot,
        context::DeriveOptions{.network_jit_level = network_jit_level, .jit_region = jit_region});
    context::Fingerprint fingerprint = context::fingerprint(snapshot, policy);
    held = std::make_shared<const DerivedPolicy>(DerivedPolicy{
        snapshot.version(), network_jit_level, std::move(policy), std::move(fingerprint)});
  }
  return held;
}

void describe_network(const CompiledNetwork& network, const context::Policy& policy,
                      bool just_compiled, GraphRunReport& report) {
  report.planned_peak_bytes = network.compiled.plan->planned_peak_bytes;
  report.memory_regime = std::string(network.compiled.plan->memory_regime());
  report.executor = std::string(network.executor->name());
  report.jit_level = std::string(context::to_string(policy.jit_level.value));
  report.fusion_level = policy.fusion_level.value;
  // A size bound to a symbolic compile reports its binding's cost and kernels.
  if (!just_compiled && !report.specialized) return;
  report.compile_ms = network.compile_ms;
  report.dump_files = network.compiled.dump_files;
  report.cache_hit = network.cache_hit;
  report.cache_key = network.cache_key;
  report.cache_note = network.cache_note;
  report.prepared_kernels = network.prepared_kernels;
  report.frozen_weight_bytes = network.frozen_weights.bytes;
}

Tensor run_compiled_cell(nn::Cell& cell, const Tensor& x, CompiledForms& forms,
                         std::optional<context::JitLevel> network_jit_level,
                         std::source_location where) {
  const auto current = current_policy();  // applies memory limits and print routing
  const bool jit_region = current->mode.value == context::ExecutionMode::kPynative;
  // Held here: the cell's forms may be re-derived while this call runs (a nested call of it).
  const std::shared_ptr<const DerivedPolicy> derived =
      derive_policy(forms.derived, network_jit_level, jit_region);
  const context::Policy& policy = derived->policy;
  GraphRunReport report;
  report.jit_region = jit_region;
  CompiledCell& form = find_or_compile(cell, x, forms, derived, report);
  if (policy.precompile_only.value) {
    log::info("precompile_only: {} compiled, not run", cell.class_name());
    forms.last_report = std::move(report);
    return Tensor();
  }
  if (jit_region) {
    Tensor y = submit_compiled(cell, x, form, derived, where, report);
    forms.last_report = std::move(report);
    return y;
  }
  const auto start = Clock::now();
  std::vector<runtime::TensorArg> outputs = run(*form.network, bind_inputs(cell, form.bindings, x),
                                                policy, context::snapshot(), cell.class_name());
  report.run_ms = millis_since(start);
  report.ran = true;
  describe_network(*form.network, policy, report.compiled, report);  // a failed hit recompiled?
  forms.last_report = std::move(report);
  return wrap_output(std::move(outputs), cell.class_name());
}

}  // namespace mf::engine
