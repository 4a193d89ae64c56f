#include "engine/autodiff/grad.h"

#include <atomic>
#include <chrono>

#include "base/logging.h"
#include "engine/autodiff/tape.h"
#include "engine/engine_state.h"
#include "engine/graph/trace.h"
#include "passes/grad_transform.h"

namespace mf {
namespace engine {

// The compiled forms of one GradFunction: a differentiated graph per input type and settings.
struct GradForms {
  struct Form {
    ir::TensorType input_type;
    std::vector<Binding> bindings;
    WeightTypes weight_types;
    std::shared_ptr<CompiledNetwork> network;
  };
  std::vector<std::unique_ptr<Form>> entries;
  GradFunction::GraphRewrite rewrite;
  std::shared_ptr<const DerivedPolicy> derived;
  GraphRunReport last_report;
};

}  // namespace engine

namespace {

using Clock = std::chrono::steady_clock;

double millis_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The graph parameter bound to each tensor of `spec` (x, then each weight); -1 for a weight the
// trace never read (its gradient is zeros).
std::vector<int64_t> wrt_parameters(nn::Cell& cell, const std::vector<engine::Binding>& bindings,
                                    const Tensor& x, const GradSpec& spec) {
  const std::vector<Tensor> bound = engine::bound_tensors(cell, bindings, x);
  std::vector<int64_t> wrt;
  if (spec.input) {
    int64_t found = -1;
    for (size_t i = 0; i < bindings.size() && found < 0; ++i) {
      if (bindings[i].kind == engine::Binding::Kind::kInput) found = int64_t(i);
    }
    wrt.push_back(found);
  }
  for (const Tensor& w : spec.weights) {
    int64_t found = -1;
    for (size_t i = 0; i < bound.size() && found < 0; ++i) {
      const bool input = bindings[i].kind == engine::Binding::Kind::kInput ||
                         bindings[i].kind == engine::Binding::Kind::kExtraInput;
      if (!input && bound[i].impl() == w.impl()) {
        found = int64_t(i);
      }
    }
    wrt.push_back(found);
  }
  return wrt;
}

std::unique_ptr<engine::GradForms::Form> compile_gradient(nn::Cell& cell, const Tensor& x,
                                                          const GradSpec& spec,
                                                          const GradFunction::GraphRewrite& rewrite,
                                                          const engine::DerivedPolicy& derived,
                                                          engine::GraphRunReport& report) {
  static std::atomic<int> compile_counter{0};
  const context::Policy& policy = derived.policy;
  const auto start = Clock::now();
  engine::TraceResult trace = engine::Tracer::trace(cell, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value,
                                                    /*trace_bprop=*/true);
  report.trace_ms = millis_since(start);
  auto form = std::make_unique<engine::GradForms::Form>();
  form->input_type = x.type();
  form->bindings = std::move(trace.bindings);
  form->weight_types.record(cell, form->bindings);
  const std::vector<int64_t> wrt = wrt_parameters(cell, form->bindings, x, spec);
  passes::GradRequest request;
  request.sens_param = spec.sens_param;
  request.custom_bprops = std::move(trace.custom_bprops);
  request.recompute_calls = std::move(trace.recompute_calls);
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (wrt[i] >= 0) request.wrt.push_back(size_t(wrt[i]));
  }
  ir::Graph& graph = *trace.graph;
  passes::differentiate(graph, request);
  // Unread weights: zeros outputs in their places, so the outputs follow the spec one to one.
  const size_t first_grad = graph.outputs().size() - request.wrt.size();
  std::vector<ir::Value> grads(graph.outputs().begin() + first_grad, graph.outputs().end());
  std::vector<ir::Value> forward(graph.outputs().begin(), graph.outputs().begin() + first_grad);
  graph.clear_outputs();
  for (ir::Value v : forward) graph.add_output(v);
  size_t next = 0;
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (wrt[i] >= 0) {
      graph.add_output(grads[next++]);
      continue;
    }
    const Tensor& w = spec.input && i == 0 ? x : spec.weights[i - (spec.input ? 1 : 0)];
    graph.add_output(
        graph
            .add_node("zeros", {},
                      {{"shape", std::vector<int64_t>(w.shape().begin(), w.shape().end())},
                       {"dtype", w.dtype()}},
                      {"Gradients/Default", ""})
            ->output());
  }
  if (rewrite) rewrite(graph, first_grad + (spec.input ? 1 : 0));
  const std::string prefix = "Gradients_" + graph.name() + "_" + std::to_string(++compile_counter);
  form->network = engine::compile(std::move(trace.graph), x.type(), policy, derived.fingerprint,
                                  engine::driver_options(policy, prefix));
  report.compiled = true;
  log::info("compiled the gradient of {} at jit_level {} in {:.3g} ms", cell.class_name(),
            context::to_string(form->network->jit_level), form->network->compile_ms);
  return form;
}

Gradients split_results(std::vector<Tensor> results, const GradSpec& spec) {
  Gradients out;
  size_t next = 0;
  out.value = results.at(next++);
  if (spec.input) out.input = results.at(next++);
  for (size_t i = 0; i < spec.weights.size(); ++i) out.weights.push_back(results.at(next++));
  return out;
}

}  // namespace

GradFunction::GradFunction(nn::Cell& cell, GradSpec spec)
    : cell_(cell), spec_(std::move(spec)), forms_(std::make_unique<engine::GradForms>()) {
  const auto parameters = cell.named_parameters();
  for (size_t i = 0; i < spec_.weights.size(); ++i) {
    const Tensor& w = spec_.weights[i];
    bool found = false;
    for (const auto& [name, p] : parameters) found = found || (w.defined() && p.impl() == w.impl());
    MF_CHECK(found, InvalidArgument, "weight ", i, " given to the gradient of ", cell.class_name(),
             " is not one of its parameters (take them from its named_parameters())");
    MF_CHECK(ir::is_floating(w.dtype()), InvalidArgument, "weight ", i, " of ", cell.class_name(),
             " has type ", ir::type_to_string(w.type()), ": only floating tensors have gradients");
  }
}

GradFunction::~GradFunction() = default;
GradFunction::GradFunction(GradFunction&&) noexcept = default;

const engine::GraphRunReport& GradFunction::graph_report() const {
  return forms_->last_report;
}

void GradFunction::set_graph_rewrite(GraphRewrite rewrite) {
  forms_->rewrite = std::move(rewrite);
  forms_->entries.clear();
}

Gradients GradFunction::operator()(std::span<const Tensor> inputs, const Tensor& sens,
                                   std::source_location where) {
  MF_CHECK(!inputs.empty(), InvalidArgument, "the gradient of ", cell_.class_name(),
           " was called with no input");
  for (size_t i = 1; i < inputs.size(); ++i) {
    MF_CHECK(inputs[i].defined(), InvalidArgument, "the gradient of ", cell_.class_name(),
             ": input ", i, " is an undefined tensor");
  }
  const nn::Cell::ExtraInputsScope extra(cell_,
                                         std::vector<Tensor>(inputs.begin() + 1, inputs.end()));
  return (*this)(inputs[0], sens, where);
}

Gradients GradFunction::operator()(const Tensor& x, const Tensor& sens,
                                   std::source_location where) {
  MF_CHECK(x.defined(), InvalidArgument, "the gradient of ", cell_.class_name(),
           ": the input tensor is undefined");
  MF_CHECK(!spec_.sens_param || sens.defined(), InvalidArgument, "the gradient of ",
           cell_.class_name(), " takes a sensitivity (sens_param) and none was given");
  if (spec_.input) {
    MF_CHECK(ir::is_floating(x.dtype()), InvalidArgument,
             "cannot take the gradient of the input of ", cell_.class_name(), " of type ",
             ir::type_to_string(x.type()), ": only floating tensors have gradients");
  }
  const auto policy = engine::current_policy();
  // A cell marked for jit is differentiated compiled in PYNATIVE mode too, as it runs.
  const bool compiled = (policy->mode.value == context::ExecutionMode::kGraph || cell_.jit()) &&
                        !engine::op_by_op_forced();
  if (!compiled) {
    forms_->last_report = {};
    engine::GradTape tape;
    std::vector<Tensor> wrt;
    if (spec_.input) {
      tape.watch(x, "the input");
      wrt.push_back(x);
    }
    for (const Tensor& w : spec_.weights) {
      tape.watch(w, "a weight");
      wrt.push_back(w);
    }
    Tensor y = cell_(x, where);
    std::vector<Tensor> results{y};
    for (Tensor& g : tape.gradients(y, spec_.sens_param ? sens : Tensor(), wrt)) {
      results.push_back(std::move(g));
    }
    return split_results(std::move(results), spec_);
  }
  engine::GraphRunReport report;
  const auto derived = engine::derive_policy(forms_->derived, cell_.jit_level(), false);
  engine::GradForms::Form* form = nullptr;
  for (auto& entry : forms_->entries) {
    if (entry->input_type == x.type() && entry->network->fingerprint == derived->fingerprint &&
        entry->weight_types.still_fit(cell_, entry->bindings)) {
      form = entry.get();
    }
  }
  if (form == nullptr) {
    forms_->entries.push_back(compile_gradient(cell_, x, spec_, forms_->rewrite, *derived, report));
    form = forms_->entries.back().get();
  }
  engine::describe_network(*form->network, derived->policy, report.compiled, report);
  std::vector<runtime::TensorArg> inputs = engine::bind_inputs(cell_, form->bindings, x);
  if (spec_.sens_param) {
    sens.sync();
    inputs.push_back({sens.type(), sens.impl()->buffer});
  }
  const auto start = Clock::now();
  std::vector<runtime::TensorArg> outputs =
      engine::run(*form->network, inputs, derived->policy, context::snapshot(),
                  "the gradient of " + cell_.class_name());
  report.run_ms = millis_since(start);
  report.ran = true;
  forms_->last_report = std::move(report);
  std::vector<Tensor> results;
  for (auto& out : outputs) results.push_back(engine::tensor_of(std::move(out)));
  return split_results(std::move(results), spec_);
}

GradFunction value_and_grad(nn::Cell& cell, GradSpec spec) {
  return GradFunction(cell, std::move(spec));
}

FunctionGradients value_and_grad(const TensorFunction& fn, const std::vector<Tensor>& args,
                                 const std::vector<size_t>& positions,
                                 const std::vector<Tensor>& weights, const Tensor& sens) {
  engine::GradTape tape;
  std::vector<Tensor> wrt;
  for (size_t p : positions) {
    MF_CHECK(p < args.size(), InvalidArgument, "Position index ", p, " is exceed input size.");
    tape.watch(args[p], "input " + std::to_string(p));
    wrt.push_back(args[p]);
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    tape.watch(weights[i], "weight " + std::to_string(i));
    wrt.push_back(weights[i]);
  }
  FunctionGradients out;
  out.value = fn(args);
  std::vector<Tensor> grads = tape.gradients(out.value, sens, wrt);
  out.inputs.assign(grads.begin(), grads.begin() + positions.size());
  out.weights.assign(grads.begin() + positions.size(), grads.end());
  return out;
}

}  // namespace mf
