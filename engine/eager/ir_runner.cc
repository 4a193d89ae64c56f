#include "engine/eager/ir_runner.h"

#include <chrono>
#include <functional>
#include <set>
#include <source_location>
#include <unordered_map>

#include "base/stack_guard.h"
#include "engine/eager/dispatch.h"
#include "engine/eager/eager_layout.h"
#include "engine/engine_state.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/kernels/conv_layout.h"

namespace mf::engine {

IrRunner::IrRunner(std::unique_ptr<ir::Graph> graph) : graph_(std::move(graph)) {}
IrRunner::~IrRunner() = default;
IrRunner::IrRunner(IrRunner&&) noexcept = default;

IrRunner IrRunner::from_file(const std::string& path) {
  auto graph = ir::parse_graph_file(path);
  ir::verify(*graph);
  return IrRunner(std::move(graph));
}

std::map<std::string, Tensor> IrRunner::bind(const std::map<std::string, Tensor>& inputs,
                                             uint64_t seed) {
  generated_.clear();
  for (const auto& [name, tensor] : inputs) {
    MF_CHECK(graph_->find_parameter(name) != nullptr, InvalidArgument, "the graph @",
             graph_->name(), " has no parameter named '", name, "'");
  }
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < graph_->num_parameters(); ++i) {
    ir::Parameter* p = graph_->parameter(i);
    auto fed = inputs.find(p->name());
    if (fed != inputs.end()) {
      MF_CHECK(fed->second.type() == p->type(), InvalidArgument, "input '", p->name(), "' is ",
               ir::type_to_string(fed->second.type()), " but the graph declares ",
               ir::type_to_string(p->type()));
      values[p->name()] = fed->second;
    } else {
      values[p->name()] = p->type().dtype == DType::kFloat32
                              ? Tensor::randn(p->type().shape, seed + i, 0.1)
                              : Tensor::zeros(p->type().shape, p->type().dtype);
      generated_.push_back(p->name());
    }
  }
  return values;
}

std::vector<std::pair<std::string, Tensor>> IrRunner::run(
    const std::map<std::string, Tensor>& inputs, uint64_t seed) {
  const std::map<std::string, Tensor> values = bind(inputs, seed);
  if (current_policy()->mode.value == context::ExecutionMode::kGraph) return run_compiled(values);
  return run_eager(values);
}

std::vector<std::string> IrRunner::output_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < graph_->outputs().size(); ++i) {
    const std::string& name = graph_->output_name(i);
    names.push_back(name.empty() ? "output" + std::to_string(i) : name);
  }
  return names;
}

const Tensor& IrRunner::constant_tensor(const ir::Constant* c) {
  // Made once per runner, not per run: a constant's tensor is never written, and copying every
  // constant's bytes into a fresh buffer was a pass over all of them on every run (a dumped graph
  // with its weights compiled in carries them all as constants).
  auto it = constants_.find(c);
  if (it == constants_.end()) {
    it = constants_
             .emplace(c, Tensor::from_bytes(c->type().dtype, c->type().shape, c->bytes().data()))
             .first;
  }
  return it->second;
}

void IrRunner::prepare_eager_kernels(const std::map<std::string, Tensor>& bound) {
  eager_prepare_ = {};
  const auto policy = current_policy();
  const int threads = policy->intra_op_threads.value;
  const bool deterministic = policy->deterministic.value;
  const bool keep_channels_last = policy->eager_channels_last.value;
  if (eager_prepared_threads_ == threads && eager_prepared_deterministic_ == deterministic &&
      eager_prepared_channels_last_ == keep_channels_last) {
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // Which values the calls will leave channels-last, so each kernel is prepared for the layout it
  // will be called with (engine/eager/eager_layout.h).
  std::set<std::pair<const ir::Node*, size_t>> stored_channels_last;  // node outputs
  std::function<void(const ir::Graph&)> prepare_in = [&](const ir::Graph& graph) {
    for (const ir::Node& node : graph.nodes()) {
      if (node.def() == nullptr) continue;
      std::vector<ir::TensorType> types;
      std::vector<bool> channels_last(node.inputs().size(), false);
      for (size_t i = 0; i < node.inputs().size(); ++i) {
        const ir::Value& v = node.inputs()[i];
        types.push_back(v.type());
        channels_last[i] = stored_channels_last.count({v.node(), v.index()}) > 0;
      }
      ir::Attrs attrs = node.attrs();
      try {
        // Inference fills in the defaults, as the call will.
        const std::vector<ir::TensorType> outputs = node.def()->infer_types(types, attrs);
        const EagerLayout layout = plan_eager_layout(*node.def(), types, channels_last, attrs,
                                                     outputs, keep_channels_last, deterministic);
        for (size_t i = 0; i < outputs.size() && i < node.num_outputs(); ++i) {
          if (layout.flags_output(outputs[i].shape)) {
            stored_channels_last.insert({&node, i});
          }
        }
        const runtime::dnnl_rt::Prepared prepared = runtime::dnnl_rt::prepare(
            node.op(), {layout.kernel_inputs, {}, layout.attrs, threads, deterministic});
        eager_prepare_.kernels += prepared.created ? 1 : 0;
        // A convolution's weights (the graph's constants, or its parameters bound for this run:
        // an ONNX file's initializers) go into its kernel's layout now, as compiling does, not
        // inside the first run (resnet18: 21 ms of reorders).
        const Tensor* weights = nullptr;
        if (node.op() == "conv2d" && node.inputs().size() > 1) {
          const ir::Value& v = node.inputs()[1];
          if (v.constant() != nullptr) {
            weights = &constant_tensor(v.constant());
          } else if (v.parameter() != nullptr && &graph == graph_.get()) {
            const auto it = bound.find(v.parameter()->name());
            if (it != bound.end()) weights = &it->second;
          }
        }
        // Only weights ready and stored as they read (not still being computed, not channels-last).
        if (weights != nullptr && weights->impl()->ready_seq == 0 &&
            !weights->impl()->channels_last && weights->impl()->buffer != nullptr) {
          const Tensor& w = *weights;
          const auto [id, version] = w.impl()->buffer->content_identity();
          runtime::ops::reorder_conv2d_weights_ahead(
              layout.kernel_inputs, layout.attrs, {w.impl()->buffer->data(), w.type(), id, version},
              threads, deterministic);
        }
      } catch (const Error&) {
        // Left to the op's call, which reports it where it belongs, at its node.
      }
    }
    for (const ir::Graph* sub : graph.subgraphs()) prepare_in(*sub);
  };
  prepare_in(*graph_);
  eager_prepare_.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  eager_prepared_threads_ = threads;
  eager_prepared_deterministic_ = deterministic;
  eager_prepared_channels_last_ = keep_channels_last;
}

std::vector<std::pair<std::string, Tensor>> IrRunner::run_eager(
    const std::map<std::string, Tensor>& bound) {
  prepare_eager_kernels(bound);
  std::vector<Tensor> args;
  for (size_t i = 0; i < graph_->num_parameters(); ++i)
    args.push_back(bound.at(graph_->parameter(i)->name()));
  const std::vector<Tensor> results =
      interpret(*graph_, args, 1, current_policy()->max_call_depth.value);
  const std::vector<std::string> names = output_names();
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (size_t i = 0; i < results.size(); ++i) outputs.emplace_back(names[i], results[i]);
  return outputs;
}

std::vector<Tensor> IrRunner::interpret(const ir::Graph& graph, const std::vector<Tensor>& args,
                                        int depth, int max_depth) {
  MF_CHECK(depth <= max_depth, InvalidArgument, "call depth exceeds max_call_depth ", max_depth,
           " in graph @", graph.name(), "; raise max_call_depth or simplify the network");
  MF_CHECK(enough_stack_left(), InvalidArgument, "call depth ", depth, " in graph @", graph.name(),
           ": ", stack_used_up_message());
  std::unordered_map<ir::Value, Tensor, ir::ValueHash> values;
  for (size_t i = 0; i < graph.num_parameters(); ++i)
    values[ir::Value(graph.parameter(i))] = args.at(i);
  for (size_t i = 0; i < graph.num_constants(); ++i) {
    ir::Constant* c = graph.constant(i);
    values[ir::Value(c)] = constant_tensor(c);
  }
  auto subgraph = [&](const ir::Node& node, const char* attr) -> const ir::Graph& {
    const ir::Graph* g = graph.resolve_subgraph(ir::attr_string(node.attrs(), attr, node.op()));
    MF_CHECK(g != nullptr, NotFound, "node %", node.id(), " of @", graph.name(),
             " names a missing subgraph");
    return *g;
  };
  auto truth = [](const Tensor& t) { return t.to_doubles().at(0) != 0; };
  // As eager frameworks do, a value is dropped once its last reader has run, so its buffer goes
  // back to the pool for later values (the queued kernels that read it hold it until they ran).
  // Graph outputs are never dropped.
  const std::vector<ir::Node*> order = graph.topological_order();
  std::unordered_map<ir::Value, size_t, ir::ValueHash> readers_left;
  for (const ir::Node* node : order) {
    for (const ir::Value& v : node->inputs()) ++readers_left[v];
  }
  for (const ir::Value& v : graph.outputs()) ++readers_left[v];  // kept: never reaches 0
  for (ir::Node* node : order) {
    std::vector<Tensor> in;
    for (const ir::Value& v : node->inputs()) in.push_back(values.at(v));
    for (const ir::Value& v : node->inputs()) {
      if (--readers_left[v] == 0) values.erase(v);
    }
    std::vector<Tensor> outs;
    try {
      if (node->op() == "call" || (node->def() != nullptr && node->def()->has(ir::Trait::kFused))) {
        // A fused kernel's body is ordinary ops: op by op, it runs like a call.
        outs = interpret(subgraph(*node, "graph"), in, depth + 1, max_depth);
      } else if (node->op() == "cond") {
        const std::vector<Tensor> branch_args(in.begin() + 1, in.end());
        outs = interpret(subgraph(*node, truth(in[0]) ? "then_branch" : "else_branch"), branch_args,
                         depth + 1, max_depth);
      } else if (node->op() == "while") {
        outs = in;
        while (truth(interpret(subgraph(*node, "cond_graph"), outs, depth + 1, max_depth).at(0))) {
          outs = interpret(subgraph(*node, "body_graph"), outs, depth + 1, max_depth);
        }
      } else {
        outs = call_op_reusing_inputs(node->op(), std::move(in), node->attrs());
      }
    } catch (Error& e) {
      e.add_context("at node %" + std::to_string(node->id()) + " (" + node->op() + ") of graph @" +
                    graph.name());
      throw;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      if (readers_left.count(node->output(k)) != 0) values[node->output(k)] = outs[k];
    }
  }
  std::vector<Tensor> results;
  for (const ir::Value& v : graph.outputs()) results.push_back(values.at(v));
  return results;
}

std::vector<std::pair<std::string, Tensor>> IrRunner::run_compiled(
    const std::map<std::string, Tensor>& bound) {
  using Clock = std::chrono::steady_clock;
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(snapshot);
  const context::Fingerprint fingerprint = context::fingerprint(snapshot, policy);
  report_ = {};
  // infer_boost: the weights are compiled in, so a form fits only the tensors it froze.
  const WeightLookup weight_of = [&](const ir::Parameter& p) {
    auto it = bound.find(p.name());
    return it == bound.end() ? Tensor() : it->second;
  };
  CompiledNetwork* network = nullptr;
  for (auto& entry : compiled_) {
    if (entry->fingerprint == fingerprint &&
        (entry->frozen_weights.tensors.empty() ||
         entry->frozen_weights.same_as(current_weights(*graph_, weight_of)))) {
      network = entry.get();
    }
  }
  if (network == nullptr) {
    // Every parameter's type is in the graph's canonical form; the first names the input.
    const ir::TensorType input =
        graph_->num_parameters() > 0 ? graph_->parameter(0)->type() : ir::TensorType{};
    const DriverOptions options = driver_options(policy, graph_->name());
    std::unique_ptr<CompiledNetwork> hooked =
        compile_hook_ ? compile_hook_(policy, fingerprint, options, report_) : nullptr;
    report_.compiled = hooked == nullptr || report_.compiled;
    compiled_.push_back(
        hooked ? std::move(hooked)
               : compile(graph_->clone(), input, policy, fingerprint, options, weight_of));
    network = compiled_.back().get();
  }
  describe_network(*network, policy, report_.compiled, report_);
  if (policy.precompile_only.value) return {};

  std::vector<runtime::TensorArg> inputs;
  const ir::Graph& compiled_graph = *network->compiled.graph;
  for (size_t i = 0; i < compiled_graph.num_parameters(); ++i) {
    const Tensor t = plain_tensor(bound.at(compiled_graph.parameter(i)->name()));
    t.sync();
    inputs.push_back({t.type(), t.impl()->buffer});
  }
  const auto start = Clock::now();
  std::vector<runtime::TensorArg> results =
      engine::run(*network, inputs, policy, snapshot, "@" + graph_->name());
  report_.run_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  report_.ran = true;
  describe_network(*network, policy, report_.compiled, report_);  // a failed hit recompiled?
  const std::vector<std::string> names = output_names();
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    outputs.emplace_back(names.at(i), tensor_of(std::move(results[i])));
  }
  return outputs;
}

}  // namespace mf::engine
