#include "engine/graph/trace.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include "base/stack_guard.h"
#include "engine/eager/eager_layout.h"
#include "engine/nn/cell.h"
#include "engine/scope.h"
#include "runtime/eager_executor.h"

namespace mf::engine {
namespace {

thread_local Tracer* active_tracer = nullptr;

// Tensors this small become graph constants, so constant folding and simplification can see them.
constexpr int64_t kMaxConstantElements = 64;

// Makes the tracer active on this thread for a scope, restoring the previous one after.
class ActiveTracer {
 public:
  explicit ActiveTracer(Tracer* tracer) : previous_(active_tracer) { active_tracer = tracer; }
  ~ActiveTracer() { active_tracer = previous_; }

 private:
  Tracer* previous_;
};

// IR names allow [A-Za-z0-9_.]: "fc1-Dense" -> "fc1_Dense".
std::string ir_name(std::string_view text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  return out.empty() ? std::string("graph") : out;
}

}  // namespace

Tracer* Tracer::active() {
  return active_tracer;
}

bool Tracer::binds_to_parameter(const Tensor& t) {
  if (active_tracer == nullptr || !t.defined()) return false;
  for (const Frame& frame : active_tracer->frames_) {
    const auto it = frame.values.find(t.impl().get());
    if (it != frame.values.end() && it->second.kind() == ir::ValueKind::kParameter) return true;
  }
  return false;
}

TraceResult Tracer::trace(nn::Cell& cell, const Tensor& x, int max_call_depth,
                          bool reserve_class_name, bool trace_bprop) {
  Tracer tracer(max_call_depth, reserve_class_name, trace_bprop);
  for (const auto& [name, tensor] : cell.named_parameters())
    tracer.weight_names_[tensor.impl().get()] = name;
  tracer.root_ = std::make_unique<ir::Graph>(ir_name(cell.class_name()));
  tracer.push_frame(tracer.root_.get());
  ir::Parameter* input = tracer.root_->add_parameter("x", x.type());
  tracer.bindings_.push_back({Binding::Kind::kInput, "x", {}});
  tracer.frames_.back().values[x.impl().get()] = input;
  tracer.keep_alive_.push_back(x.impl());
  // Each extra input becomes a parameter of its own, traced through a symbolic stand-in: the
  // caller's tensor may also be x, another extra input or a weight, and the graph must still read
  // each from its own binding on later calls.
  std::vector<Tensor> stand_ins;
  for (size_t i = 0; i < cell.extra_inputs().size(); ++i) {
    const Tensor& given = cell.extra_inputs()[i];
    std::string name = "x" + std::to_string(i + 1);
    while (tracer.root_->find_parameter(name) != nullptr || tracer.names_weight(name)) name += "_";
    ir::Parameter* p = tracer.root_->add_parameter(name, given.type());
    tracer.bindings_.push_back({Binding::Kind::kExtraInput, name, {}, i});
    stand_ins.push_back(tracer.symbolic(given.type(), p));
  }
  const nn::Cell::ExtraInputsScope traced_extra_inputs(cell, std::move(stand_ins));
  {
    ActiveTracer active(&tracer);
    Tensor y;
    if (trace_bprop && cell.has_bprop()) {
      cell.check_bprop_takes_this_call();
      y = tracer.call_cell(cell, x);  // its own call, so the bprop has a call to replace
    } else {
      ScopeGuard scope(cell.instance_name(), cell.class_name(), reserve_class_name);
      y = cell.forward(x);
    }
    tracer.root_->add_output(tracer.resolve(y));
  }
  return {std::move(tracer.root_), std::move(tracer.bindings_), std::move(tracer.custom_bprops_),
          std::move(tracer.recompute_calls_)};
}

bool Tracer::names_weight(const std::string& name) const {
  for (const auto& [impl, weight] : weight_names_) {
    if (weight == name) return true;
  }
  return false;
}

void Tracer::push_frame(ir::Graph* graph) {
  frames_.push_back(Frame{graph, {}, {}});
}

void Tracer::check_depth(std::string_view what) {
  MF_CHECK(int(frames_.size()) <= max_call_depth_, InvalidArgument, "the call depth of ",
           echo(what), " exceeds max_call_depth ", max_call_depth_, " at scope ",
           echo(current_scope()), "; raise max_call_depth (context) or nest fewer cells");
  MF_CHECK(enough_stack_left(), InvalidArgument, "the call depth of ", echo(what), " (",
           frames_.size(), ") at scope ", echo(current_scope()), ": ", stack_used_up_message());
}

std::string Tracer::unique_subgraph_name(std::string base) {
  base = ir_name(base);
  const int n = subgraph_names_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

Tensor Tracer::symbolic(const ir::TensorType& type, ir::Value value) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = type;  // no buffer: the value exists only when the compiled graph runs
  frames_.back().values[impl.get()] = value;
  keep_alive_.push_back(impl);
  return Tensor(impl);
}

ir::Value Tracer::lift(const std::shared_ptr<TensorImpl>& impl, size_t frame) {
  resolve(impl, frame - 1);  // make sure every enclosing frame has it too
  Frame& f = frames_[frame];
  ir::Parameter* p =
      f.graph->add_parameter("capture" + std::to_string(f.captured.size()), impl->type);
  f.values[impl.get()] = p;
  f.captured.push_back(impl.get());
  return p;
}

ir::Value Tracer::resolve(const std::shared_ptr<TensorImpl>& impl, size_t frame) {
  MF_CHECK(impl != nullptr, InvalidArgument, "an undefined tensor was used while tracing at scope ",
           current_scope());
  if (auto it = frames_[frame].values.find(impl.get()); it != frames_[frame].values.end())
    return it->second;
  for (size_t outer = 0; outer < frame; ++outer) {
    if (frames_[outer].values.count(impl.get())) return lift(impl, frame);
  }
  // No buffer and no task that will fill it: a symbolic value of a finished trace.
  MF_CHECK(impl->buffer != nullptr || impl->ready_seq != 0, InvalidArgument,
           "a tensor traced inside a finished cell call or branch was used outside it (at scope ",
           current_scope(), "); return it from that cell instead of keeping it aside");
  keep_alive_.push_back(impl);
  const auto weight = weight_names_.find(impl.get());
  if (weight != weight_names_.end() || impl->is_parameter ||
      Tensor(impl).numel() > kMaxConstantElements) {
    if (frame > 0) return lift(impl, frame);
    const bool is_weight = weight != weight_names_.end();
    const std::string name =
        is_weight ? weight->second : "captured" + std::to_string(bindings_.size());
    ir::Parameter* p = root_->add_parameter(name, impl->type, /*is_weight=*/true);
    bindings_.push_back(is_weight ? Binding{Binding::Kind::kWeight, name, {}}
                                  : Binding{Binding::Kind::kCaptured, name, Tensor(impl)});
    frames_[0].values[impl.get()] = p;
    return p;
  }
  // A small tensor made outside the trace that is no parameter (ops::scalar(1.5), a mask): its
  // value is part of the graph, as MindSpore makes a captured Tensor a constant.
  const Tensor t(impl);
  const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
  ir::Constant* c = frames_[frame].graph->add_constant(
      impl->type, std::vector<uint8_t>(bytes, bytes + t.nbytes()));
  frames_[frame].values[impl.get()] = c;
  return c;
}

std::vector<Tensor> Tracer::record(std::string_view op, std::span<const Tensor> inputs,
                                   ir::Attrs attrs, std::source_location where) {
  std::vector<ir::Value> values;
  for (const Tensor& t : inputs) values.push_back(resolve(t));
  ir::Node* node;
  try {
    node = frames_.back().graph->add_node(
        op, std::move(values), std::move(attrs),
        ir::NodeInfo{current_scope(), runtime::format_call_site(where)});
  } catch (Error& e) {
    e.add_context("while tracing op '" + std::string(op) + "' at scope " + current_scope() +
                  ", called from " + runtime::format_call_site(where));
    throw;
  }
  std::vector<Tensor> outputs;
  for (size_t k = 0; k < node->num_outputs(); ++k)
    outputs.push_back(symbolic(node->output_type(k), node->output(k)));
  return outputs;
}

Tensor Tracer::call_cell(nn::Cell& cell, const Tensor& x) {
  ScopeGuard scope(cell.instance_name(), cell.class_name(), reserve_);
  const std::string call_scope = current_scope();
  const size_t parent = frames_.size() - 1;
  const ir::Value x_outer = resolve(x);
  ir::Graph* sub = frames_[parent].graph->add_subgraph(
      unique_subgraph_name(cell.instance_name() + "_" + cell.class_name()));
  push_frame(sub);
  check_depth("cell " + cell.class_name());
  frames_.back().values[x.impl().get()] = sub->add_parameter("x", x.type());
  const Tensor y = cell.forward(x);
  sub->add_output(resolve(y));
  const std::vector<const TensorImpl*> captured = frames_.back().captured;
  frames_.pop_back();

  std::vector<ir::Value> inputs = {x_outer};
  for (const TensorImpl* impl : captured) inputs.push_back(frames_[parent].values.at(impl));
  std::optional<passes::CustomBprop> custom;
  if (trace_bprop_ && cell.has_bprop()) {
    cell.check_bprop_takes_this_call();
    auto [bprop_name, bprop_captured] = trace_bprop(cell, parent, x, y, *sub, captured);
    // The body takes the bprop's captures too (unused), so the call's inputs stay its parameters.
    for (const TensorImpl* impl : bprop_captured) {
      sub->add_parameter("bprop_capture" + std::to_string(inputs.size()), impl->type);
      inputs.push_back(frames_[parent].values.at(impl));
    }
    custom = passes::CustomBprop{bprop_name, bprop_captured.size()};
  }
  ir::Node* call = frames_[parent].graph->create_node(nullptr, "call", std::move(inputs),
                                                      {{"graph", sub->name()}}, {y.type()},
                                                      ir::NodeInfo{call_scope, {}});
  if (custom) custom_bprops_[call] = std::move(*custom);
  if (trace_bprop_ && cell.is_recompute()) recompute_calls_.insert(call);
  return symbolic(y.type(), call->output(0));
}

std::pair<std::string, std::vector<const TensorImpl*>> Tracer::trace_bprop(
    nn::Cell& cell, size_t parent, const Tensor& x, const Tensor& y, ir::Graph& body,
    const std::vector<const TensorImpl*>& body_captured) {
  ir::Graph* bprop =
      frames_[parent].graph->add_subgraph(unique_subgraph_name(body.name() + "_bprop"));
  push_frame(bprop);
  check_depth("the bprop of cell " + cell.class_name());
  const Tensor bx = symbolic(x.type(), bprop->add_parameter("x", x.type()));
  const Tensor out = symbolic(y.type(), bprop->add_parameter("out", y.type()));
  const Tensor dout = symbolic(y.type(), bprop->add_parameter("dout", y.type()));
  // The body's captures come first, in the call's order: the bprop reads the same weights.
  for (const TensorImpl* impl : body_captured) {
    frames_.back().values[impl] = bprop->add_parameter(
        "capture" + std::to_string(frames_.back().captured.size()), impl->type);
    frames_.back().captured.push_back(impl);
  }
  const Tensor dx = cell.run_bprop(bx, out, dout);
  bprop->add_output(resolve(dx));
  std::vector<const TensorImpl*> added(frames_.back().captured.begin() + body_captured.size(),
                                       frames_.back().captured.end());
  frames_.pop_back();
  return {bprop->name(), std::move(added)};
}

Tensor Tracer::trace_cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
                          const std::function<Tensor()>& else_fn) {
  MF_CHECK(pred.numel() == 1, InvalidArgument,
           "cond: the predicate must hold one element, got shape ",
           ir::shape_to_string(pred.shape()));
  const size_t parent = frames_.size() - 1;
  const ir::Value pred_value = resolve(pred);
  const std::string base = unique_subgraph_name("cond");

  ir::Graph* then_graph = frames_[parent].graph->add_subgraph(base + "_then");
  push_frame(then_graph);
  check_depth("cond");
  const Tensor then_out = then_fn();
  then_graph->add_output(resolve(then_out));
  const std::vector<const TensorImpl*> then_captured = frames_.back().captured;
  frames_.pop_back();

  // The else branch sees the then branch's captures first, so both branches take the same
  // parameters.
  ir::Graph* else_graph = frames_[parent].graph->add_subgraph(base + "_else");
  push_frame(else_graph);
  for (const TensorImpl* impl : then_captured) {
    frames_.back().values[impl] = else_graph->add_parameter(
        "capture" + std::to_string(frames_.back().captured.size()), impl->type);
    frames_.back().captured.push_back(impl);
  }
  const Tensor else_out = else_fn();
  else_graph->add_output(resolve(else_out));
  const std::vector<const TensorImpl*> captured = frames_.back().captured;
  frames_.pop_back();
  for (size_t i = then_captured.size(); i < captured.size(); ++i) {
    then_graph->add_parameter("capture" + std::to_string(i), captured[i]->type);
  }
  MF_CHECK(then_out.type() == else_out.type(), InvalidArgument,
           "cond: the branches return different types: ", ir::type_to_string(then_out.type()),
           " and ", ir::type_to_string(else_out.type()), " at scope ", current_scope());

  std::vector<ir::Value> inputs = {pred_value};
  for (const TensorImpl* impl : captured) inputs.push_back(frames_[parent].values.at(impl));
  ir::Node* node = frames_[parent].graph->create_node(
      nullptr, "cond", std::move(inputs),
      {{"then_branch", then_graph->name()}, {"else_branch", else_graph->name()}}, {then_out.type()},
      ir::NodeInfo{current_scope(), {}});
  return symbolic(then_out.type(), node->output(0));
}

std::vector<Tensor> Tracer::trace_while(
    const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
    const std::vector<Tensor>& init) {
  const size_t parent = frames_.size() - 1;
  std::vector<ir::Value> init_values;
  for (const Tensor& t : init) init_values.push_back(resolve(t));
  const std::string base = unique_subgraph_name("while");

  // Fresh symbolic loop variables bound to a subgraph's first parameters.
  auto enter = [&](ir::Graph* graph) {
    push_frame(graph);
    check_depth("while_loop");
    std::vector<Tensor> vars;
    for (size_t i = 0; i < init.size(); ++i) {
      vars.push_back(
          symbolic(init[i].type(), graph->add_parameter("v" + std::to_string(i), init[i].type())));
    }
    return vars;
  };

  ir::Graph* cond_graph = frames_[parent].graph->add_subgraph(base + "_cond");
  const Tensor pred = cond_fn(enter(cond_graph));
  MF_CHECK(pred.numel() == 1, InvalidArgument,
           "while_loop: the condition must return one element, got shape ",
           ir::shape_to_string(pred.shape()));
  cond_graph->add_output(resolve(pred));
  const std::vector<const TensorImpl*> cond_captured = frames_.back().captured;
  frames_.pop_back();

  ir::Graph* body_graph = frames_[parent].graph->add_subgraph(base + "_body");
  std::vector<Tensor> vars = enter(body_graph);
  for (const TensorImpl* impl : cond_captured) {
    frames_.back().values[impl] = body_graph->add_parameter(
        "capture" + std::to_string(frames_.back().captured.size()), impl->type);
    frames_.back().captured.push_back(impl);
  }
  const std::vector<Tensor> next = body_fn(vars);
  MF_CHECK(next.size() == init.size(), InvalidArgument, "while_loop: the body returns ",
           next.size(), " tensors for ", init.size(), " loop variables");
  for (size_t i = 0; i < next.size(); ++i) {
    MF_CHECK(next[i].type() == init[i].type(), InvalidArgument, "while_loop: loop variable ", i,
             " is ", ir::type_to_string(init[i].type()), " but the body returns ",
             ir::type_to_string(next[i].type()));
    body_graph->add_output(resolve(next[i]));
  }
  const std::vector<const TensorImpl*> captured = frames_.back().captured;
  // Captured tensors ride along as loop variables that the body passes through unchanged.
  for (const TensorImpl* impl : captured) body_graph->add_output(frames_.back().values.at(impl));
  frames_.pop_back();
  for (size_t i = cond_captured.size(); i < captured.size(); ++i) {
    cond_graph->add_parameter("capture" + std::to_string(i), captured[i]->type);
  }

  std::vector<ir::Value> inputs = init_values;
  std::vector<ir::TensorType> types;
  for (const Tensor& t : init) types.push_back(t.type());
  for (const TensorImpl* impl : captured) {
    inputs.push_back(frames_[parent].values.at(impl));
    types.push_back(impl->type);
  }
  ir::Node* node = frames_[parent].graph->create_node(
      nullptr, "while", std::move(inputs),
      {{"cond_graph", cond_graph->name()}, {"body_graph", body_graph->name()}}, types,
      ir::NodeInfo{current_scope(), {}});
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < init.size(); ++i)
    outputs.push_back(symbolic(init[i].type(), node->output(i)));
  return outputs;
}

Tensor tensor_of(runtime::TensorArg arg) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = std::move(arg.type);
  impl->buffer = std::move(arg.buffer);
  return Tensor(impl);
}

namespace {

// A captured tensor, or, for a parameter its cell has replaced since, the tensor in its place.
// Bounded: cells sharing a parameter could in principle link replacements in a ring.
Tensor current_parameter(const Tensor& captured) {
  constexpr int kMaxReplacements = 1024;
  std::shared_ptr<TensorImpl> impl = captured.impl();
  for (int hop = 0; impl != nullptr && impl->slot != nullptr && hop < kMaxReplacements; ++hop) {
    std::shared_ptr<TensorImpl> next = impl->slot->current.lock();
    if (next == nullptr || next == impl || !(next->type == impl->type)) break;
    impl = std::move(next);
  }
  return Tensor(impl);
}

}  // namespace

std::vector<Tensor> bound_tensors(nn::Cell& cell, const std::vector<Binding>& bindings,
                                  const Tensor& x) {
  std::vector<std::pair<std::string, Tensor>> weights;  // fetched once, only if a weight is bound
  bool have_weights = false;
  std::vector<Tensor> out;
  out.reserve(bindings.size());
  for (const Binding& binding : bindings) {
    Tensor t;
    switch (binding.kind) {
      case Binding::Kind::kInput:
        t = x;
        break;
      case Binding::Kind::kCaptured:
        t = current_parameter(binding.captured);
        break;
      case Binding::Kind::kExtraInput:
        MF_CHECK(binding.extra_index < cell.extra_inputs().size(), Internal, cell.class_name(),
                 "'s trace binds extra input ", binding.extra_index + 1, " of a call with ",
                 cell.extra_inputs().size());
        t = cell.extra_inputs()[binding.extra_index];
        break;
      case Binding::Kind::kWeight:
        if (!have_weights) weights = cell.named_parameters(), have_weights = true;
        for (const auto& [name, tensor] : weights) {
          if (name == binding.name) t = tensor;
        }
        MF_CHECK(t.defined(), Internal, cell.class_name(), " has no parameter '", binding.name,
                 "' that its trace binds");
        break;
    }
    out.push_back(std::move(t));
  }
  return out;
}

namespace {
std::vector<ir::TensorType> weight_types_now(nn::Cell& cell, const std::vector<Binding>& bindings) {
  std::vector<ir::TensorType> out;
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const Binding& binding : bindings) {
    if (binding.kind != Binding::Kind::kWeight) continue;
    if (weights.empty()) weights = cell.named_parameters();
    ir::TensorType type;
    for (const auto& [name, tensor] : weights) {
      if (name == binding.name) type = tensor.type();
    }
    out.push_back(std::move(type));
  }
  return out;
}
}  // namespace

namespace {
std::vector<bool> training_now(const nn::Cell& cell) {
  std::vector<bool> out{cell.training()};
  for (const auto& [path, child] : cell.named_descendants()) out.push_back(child->training());
  return out;
}
std::vector<bool> recompute_now(const nn::Cell& cell) {
  std::vector<bool> out{cell.is_recompute()};
  for (const auto& [path, child] : cell.named_descendants()) out.push_back(child->is_recompute());
  return out;
}
}  // namespace

namespace {
std::vector<ir::TensorType> extra_input_types(const nn::Cell& cell) {
  std::vector<ir::TensorType> out;
  for (const Tensor& t : cell.extra_inputs()) out.push_back(t.type());
  return out;
}
}  // namespace

void WeightTypes::record(nn::Cell& cell, const std::vector<Binding>& bindings) {
  extra_inputs = extra_input_types(cell);
  checked_generation = nn::Cell::trace_state_generation();
  types = weight_types_now(cell, bindings);
  training = training_now(cell);
  recompute = recompute_now(cell);
}

bool WeightTypes::still_fit(nn::Cell& cell, const std::vector<Binding>& bindings) {
  if (cell.extra_inputs().size() != extra_inputs.size()) return false;
  for (size_t i = 0; i < extra_inputs.size(); ++i) {
    if (!(cell.extra_inputs()[i].type() == extra_inputs[i])) return false;
  }
  const uint64_t now = nn::Cell::trace_state_generation();
  if (now == checked_generation) return true;
  if (weight_types_now(cell, bindings) != types || training_now(cell) != training ||
      recompute_now(cell) != recompute) {
    return false;
  }
  checked_generation = now;
  return true;
}

std::vector<runtime::TensorArg> bind_inputs(nn::Cell& cell, const std::vector<Binding>& bindings,
                                            const Tensor& x) {
  std::vector<runtime::TensorArg> inputs;
  for (const Tensor& bound : bound_tensors(cell, bindings, x)) {
    const Tensor t = plain_tensor(bound);  // the graph reads NCHW
    t.sync();                              // PYNATIVE work that produces an input must finish first
    inputs.push_back({t.type(), t.impl()->buffer});
  }
  return inputs;
}

}  // namespace mf::engine
