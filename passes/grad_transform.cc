#include "passes/grad_transform.h"

#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "ir/grad_builder.h"

namespace mf::passes {
namespace {

using ir::GradValue;
using ir::Value;

// A rule's view of one forward node; what it emits is appended to the graph.
class GraphGradBuilder final : public ir::GradBuilder {
 public:
  GraphGradBuilder(ir::Graph& graph, ir::Node& node, std::vector<Value> douts,
                   std::vector<bool> wants)
      : graph_(graph),
        node_(node),
        douts_(std::move(douts)),
        wants_(std::move(wants)),
        grads_(node.num_inputs()),
        info_{ir::gradient_scope(node.scope()), node.location()} {}

  size_t num_inputs() const override { return node_.num_inputs(); }
  size_t num_outputs() const override { return node_.num_outputs(); }
  const ir::Attrs& attrs() const override { return node_.attrs(); }
  const ir::TensorType& input_type(size_t i) const override { return node_.input(i).type(); }
  const ir::TensorType& output_type(size_t k) const override { return node_.output_type(k); }
  GradValue input(size_t i) override {
    check_declared(node_.def()->grad_needs.inputs, i, "input");
    return add(node_.input(i));
  }
  GradValue output(size_t k) override {
    check_declared(node_.def()->grad_needs.outputs, k, "output");
    return add(node_.output(k));
  }
  GradValue dout(size_t k) override {
    MF_CHECK(k < douts_.size(), Internal, "dout(", k, ") of op ", node_.op());
    if (!douts_[k]) douts_[k] = values_.at(size_t(zeros_like(node_.output_type(k)).id));
    return add(douts_[k]);
  }
  bool wants_grad(size_t i) const override { return i < wants_.size() && wants_[i]; }
  void set_grad(size_t i, GradValue grad) override {
    MF_CHECK(i < grads_.size() && !grads_[i], Internal, "the backward rule of ", node_.op(),
             " set the gradient of input ", i, " twice or out of range");
    const Value v = values_.at(size_t(grad.id));
    MF_CHECK(v.type() == node_.input(i).type(), Internal, "the backward rule of ", node_.op(),
             " gave input ", i, " a gradient of type ", ir::type_to_string(v.type()),
             " for an input of type ", ir::type_to_string(node_.input(i).type()));
    grads_[i] = v;
  }
  const ir::TensorType& type(GradValue value) const override {
    return values_.at(size_t(value.id)).type();
  }
  std::vector<GradValue> emit(std::string_view op, std::vector<GradValue> inputs,
                              ir::Attrs attrs) override {
    std::vector<Value> operands;
    operands.reserve(inputs.size());
    for (GradValue g : inputs) operands.push_back(values_.at(size_t(g.id)));
    ir::Node* node = graph_.add_node(op, std::move(operands), std::move(attrs), info_);
    std::vector<GradValue> outputs;
    for (size_t k = 0; k < node->num_outputs(); ++k) outputs.push_back(add(node->output(k)));
    return outputs;
  }
  GradValue scalar(double value, ir::DType dtype) override {
    if (dtype == ir::DType::kFloat64) return add(graph_.add_constant<double>({}, {value}));
    MF_CHECK(dtype == ir::DType::kFloat32, Internal, "a backward rule asked for a scalar of ",
             ir::dtype_name(dtype));
    return add(graph_.add_constant<float>({}, {static_cast<float>(value)}));
  }

  const std::vector<Value>& grads() const { return grads_; }
  const ir::NodeInfo& info() const { return info_; }

 private:
  GradValue add(Value v) {
    values_.push_back(v);
    return GradValue{int32_t(values_.size() - 1)};
  }
  void check_declared(uint32_t mask, size_t position, const char* what) const {
    MF_CHECK(position < 32 && (mask >> position & 1u) != 0, Internal, "the backward rule of ",
             node_.op(), " reads its ", what, " ", position,
             " without declaring it in its GradNeeds");
  }

  ir::Graph& graph_;
  ir::Node& node_;
  std::vector<Value> douts_;
  std::vector<bool> wants_;
  std::vector<Value> grads_;
  ir::NodeInfo info_;
  std::vector<Value> values_;
};

// The gradient sums: a value's contributions are added as they arrive, the earlier sum first.
class GradientSums {
 public:
  explicit GradientSums(ir::Graph& graph) : graph_(graph) {}
  void add(Value v, Value contribution, const ir::NodeInfo& info) {
    auto [it, fresh] = sums_.try_emplace(v, contribution);
    if (!fresh) it->second = graph_.add_node("add", {it->second, contribution}, {}, info)->output();
  }
  Value find(Value v) const {
    auto it = sums_.find(v);
    return it == sums_.end() ? Value() : it->second;
  }

 private:
  ir::Graph& graph_;
  std::unordered_map<Value, Value, ir::ValueHash> sums_;
};

// The callee of a `call` node, or null.
const std::string* call_target(const ir::Node& node) {
  if (node.op() != "call") return nullptr;
  auto it = node.attrs().find("graph");
  return it == node.attrs().end() ? nullptr : std::get_if<std::string>(&it->second);
}

// Copies every call's body in place of the call, and the calls among the copies in turn, each
// callee resolved from the graph that holds its call (a cell's children are its subgraphs), so
// the backward sees one flat list of ops in program order, as the tape does. Traces never recurse
// (each call of a cell is its own subgraph) and are bounded by max_call_depth; the explicit stack
// keeps deep nesting off the C++ stack.
void flatten_calls(ir::Graph& graph) {
  struct Pending {
    ir::Node* call;
    const ir::Graph* context;
  };
  std::vector<Pending> pending;
  for (ir::Node& node : graph.nodes()) {
    if (call_target(node) != nullptr) pending.push_back({&node, &graph});
  }
  while (!pending.empty()) {
    const Pending next = pending.back();
    pending.pop_back();
    ir::Node& call = *next.call;
    const ir::Graph* callee = next.context->resolve_subgraph(*call_target(call));
    MF_CHECK(callee != nullptr, InvalidArgument, "call of @", echo(*call_target(call), 80),
             ": no such subgraph");
    MF_CHECK(callee->outputs().size() == call.num_outputs(), InvalidArgument, "call of @",
             callee->name(), " has ", call.num_outputs(), " outputs but the subgraph returns ",
             callee->outputs().size());
    std::unordered_map<Value, Value, ir::ValueHash> mapped;
    for (size_t i = 0; i < callee->num_parameters(); ++i) {
      mapped[Value(callee->parameter(i))] = call.input(i);
    }
    for (size_t c = 0; c < callee->num_constants(); ++c) {
      const ir::Constant* constant = callee->constant(c);
      mapped[Value(callee->constant(c))] = graph.add_constant(constant->type(), constant->bytes());
    }
    for (const ir::Node& node : callee->nodes()) {
      std::vector<Value> inputs;
      for (const Value& v : node.inputs()) inputs.push_back(mapped.at(v));
      ir::NodeInfo info = node.info();
      if (info.scope.empty()) info.scope = call.scope();
      if (info.location.empty()) info.location = call.location();
      const auto types = node.output_types();
      ir::Node* copy = graph.create_node(&call, node.op(), std::move(inputs), node.attrs(),
                                         {types.begin(), types.end()}, std::move(info));
      for (size_t k = 0; k < node.num_outputs(); ++k) {
        mapped[Value(const_cast<ir::Node*>(&node), k)] = copy->output(k);
      }
      if (call_target(*copy) != nullptr) pending.push_back({copy, callee});
    }
    for (size_t k = 0; k < call.num_outputs(); ++k) {
      graph.replace_all_uses(call.output(k), mapped.at(callee->outputs()[k]));
    }
    graph.erase_node(&call);
  }
}

Value zeros_of(ir::Graph& graph, const ir::TensorType& type, const ir::NodeInfo& info) {
  return graph
      .add_node("zeros", {},
                {{"shape", std::vector<int64_t>(type.shape.begin(), type.shape.end())},
                 {"dtype", type.dtype}},
                info)
      ->output();
}

}  // namespace

void differentiate(ir::Graph& graph, const GradRequest& request) {
  flatten_calls(graph);
  MF_CHECK(request.output < graph.outputs().size(), InvalidArgument, "graph @", graph.name(),
           " has ", graph.outputs().size(), " outputs; cannot differentiate output ",
           request.output);
  const Value y = graph.outputs()[request.output];
  MF_CHECK(ir::is_floating(y.type().dtype), InvalidArgument, "cannot differentiate output ",
           request.output, " of type ", ir::type_to_string(y.type()),
           ": gradients are taken of floating outputs");
  std::unordered_set<Value, ir::ValueHash> active;
  std::vector<ir::Parameter*> wrt;
  for (size_t index : request.wrt) {
    MF_CHECK(index < graph.num_parameters(), InvalidArgument, "graph @", graph.name(), " has ",
             graph.num_parameters(), " parameters; cannot differentiate with respect to ", index);
    ir::Parameter* p = graph.parameter(index);
    MF_CHECK(ir::is_floating(p->type().dtype), InvalidArgument, "cannot take the gradient of '",
             p->name(), "' of type ", ir::type_to_string(p->type()),
             ": only floating inputs have gradients");
    wrt.push_back(p);
    active.insert(Value(p));
  }
  // Forward: which values depend on a parameter asked for, through ops that carry gradients.
  std::vector<ir::Node*> forward;
  for (ir::Node& node : graph.nodes()) {
    forward.push_back(&node);
    bool reached = false;
    for (const Value& in : node.inputs()) reached = reached || active.count(in) != 0;
    if (!reached) continue;
    for (size_t k = 0; k < node.num_outputs(); ++k) {
      if (ir::carries_gradient(node.def(), node.output_type(k))) active.insert(node.output(k));
    }
  }
  const ir::NodeInfo seed_info{"Gradients/Default", ""};
  Value seed;
  if (request.sens_param) {
    seed = graph.add_parameter("sens", y.type());
  } else {
    seed = graph
               .add_node(
                   "ones", {},
                   {{"shape", std::vector<int64_t>(y.type().shape.begin(), y.type().shape.end())},
                    {"dtype", y.type().dtype}},
                   seed_info)
               ->output();
  }
  GradientSums sums(graph);
  if (active.count(y) != 0) sums.add(y, seed, seed_info);
  // Backward: nodes in reverse program order; each rule's input gradients in input order.
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Node& node = **it;
    std::vector<Value> douts(node.num_outputs());
    bool any_dout = false;
    for (size_t k = 0; k < node.num_outputs(); ++k) {
      if (active.count(node.output(k)) == 0) continue;
      douts[k] = sums.find(node.output(k));
      any_dout = any_dout || bool(douts[k]);
    }
    if (!any_dout) continue;
    std::vector<bool> wants(node.num_inputs());
    bool any_want = false;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      wants[i] = active.count(node.input(i)) != 0;
      any_want = any_want || wants[i];
    }
    if (!any_want) continue;
    const ir::BackwardFn& rule = ir::backward_rule(node.def(), node.op(), node.scope());
    GraphGradBuilder builder(graph, node, std::move(douts), std::move(wants));
    rule(builder);
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (builder.grads()[i] && active.count(node.input(i)) != 0) {
        sums.add(node.input(i), builder.grads()[i], builder.info());
      }
    }
  }
  std::vector<Value> results;
  for (ir::Parameter* p : wrt) {
    Value g = sums.find(Value(p));
    results.push_back(g ? g : zeros_of(graph, p->type(), seed_info));
  }
  if (!request.keep_outputs) graph.clear_outputs();
  for (Value g : results) graph.add_output(g);
}

}  // namespace mf::passes
