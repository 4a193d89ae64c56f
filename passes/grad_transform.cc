#include "passes/grad_transform.h"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "ir/call_graph.h"
#include "ir/grad_builder.h"

namespace mf::passes {
namespace {

constexpr std::string_view kRecomputePrefix = "Recompute/";

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
    switch (dtype) {
      case ir::DType::kFloat64:
        return add(graph_.add_constant<double>({}, {value}));
      case ir::DType::kFloat32:
        return add(graph_.add_constant<float>({}, {static_cast<float>(value)}));
      case ir::DType::kInt32:
        return add(graph_.add_constant<int32_t>({}, {static_cast<int32_t>(value)}));
      case ir::DType::kInt64:
        return add(graph_.add_constant<int64_t>({}, {static_cast<int64_t>(value)}));
      case ir::DType::kBool:
        return add(graph_.add_constant<bool>({}, std::vector<bool>{value != 0}));
    }
    MF_FAIL(Internal, "a backward rule asked for a scalar of ", ir::dtype_name(dtype));
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
  // Replaces v's sum by one that continues it (a cond's backward took the sum as an input).
  void set(Value v, Value sum) { sums_[v] = sum; }

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

// A cell with a custom bprop, flattened: its body's copies (nested ones too) are skipped by the
// backward, which instead applies the traced bprop where the body's output is made.
struct CustomRegion {
  Value x;                      // the cell's input
  Value out;                    // the body's output
  std::vector<Value> captures;  // what the bprop reads besides (x, out, dout)
  const ir::Graph* bprop = nullptr;
  ir::NodeInfo info;
};

struct Flattened {
  std::vector<CustomRegion> regions;
  // Each copied node inside a region: the outermost region holding it.
  std::unordered_map<const ir::Node*, size_t> outermost;
  // Each copied node inside a recomputed cell: which call of one (the outermost) it came from.
  std::unordered_map<const ir::Node*, size_t> recomputed;
};

// A unique name for a new subgraph of `graph`, from `base`.
std::string fresh_subgraph_name(const ir::Graph& graph, const std::string& base) {
  std::string name = base;
  for (int n = 1; graph.resolve_subgraph(name) != nullptr; ++n)
    name = base + "_" + std::to_string(n);
  return name;
}

// The attributes of `node` (a node of `context`) for a copy in `graph`: a cond or while body that
// `graph` would not resolve to the same subgraph is copied into `graph` and named there.
ir::Attrs subgraphs_reachable_from(ir::Graph& graph, const ir::Graph& context,
                                   const ir::Node& node) {
  ir::Attrs attrs = node.attrs();
  if (node.op() == "call") return attrs;  // flattened in turn, resolved from its context
  for (auto& [name, value] : attrs) {
    const std::string* target = std::get_if<std::string>(&value);
    if (!ir::names_subgraph(name) || target == nullptr) continue;
    const ir::Graph* sub = context.resolve_subgraph(*target);
    if (sub == nullptr || graph.resolve_subgraph(*target) == sub) continue;
    value = graph.add_subgraph_copy(fresh_subgraph_name(graph, sub->name()), *sub)->name();
  }
  return attrs;
}

// Copies every call's body in place of the call, and the calls among the copies in turn, each
// callee resolved from the graph that holds its call (a cell's children are its subgraphs), so
// the backward sees one flat list of ops in program order, as the tape does. Traces never recurse
// (each call of a cell is its own subgraph) and are bounded by max_call_depth; the explicit stack
// keeps deep nesting off the C++ stack.
Flattened flatten_calls(ir::Graph& graph, std::unordered_map<const ir::Node*, CustomBprop> custom,
                        std::unordered_set<const ir::Node*> recompute) {
  constexpr size_t kNone = SIZE_MAX;
  struct Pending {
    ir::Node* call;
    const ir::Graph* context;
    std::vector<size_t> regions;  // enclosing custom regions, outermost first
    size_t recomputed;            // the enclosing recomputed call, or kNone
  };
  Flattened result;
  size_t recomputed_calls = 0;
  std::vector<Pending> pending;
  for (ir::Node& node : graph.nodes()) {
    if (call_target(node) != nullptr) pending.push_back({&node, &graph, {}, kNone});
  }
  while (!pending.empty()) {
    Pending next = std::move(pending.back());
    pending.pop_back();
    ir::Node& call = *next.call;
    const ir::Graph* callee = next.context->resolve_subgraph(*call_target(call));
    MF_CHECK(callee != nullptr, InvalidArgument, "call of @", echo(*call_target(call), 80),
             ": no such subgraph");
    MF_CHECK(callee->outputs().size() == call.num_outputs(), InvalidArgument, "call of @",
             callee->name(), " has ", call.num_outputs(), " outputs but the subgraph returns ",
             callee->outputs().size());
    std::vector<size_t> regions = next.regions;
    size_t recomputed = next.recomputed;
    if (recomputed == kNone && recompute.count(&call) != 0) recomputed = recomputed_calls++;
    if (auto bprop = custom.find(&call); bprop != custom.end()) {
      CustomRegion region;
      region.bprop = next.context->resolve_subgraph(bprop->second.graph);
      MF_CHECK(region.bprop != nullptr, InvalidArgument, "call of @", callee->name(),
               ": no bprop subgraph @", echo(bprop->second.graph, 80));
      region.x = call.input(0);
      for (size_t i = 1; i < call.num_inputs(); ++i) region.captures.push_back(call.input(i));
      region.info = {ir::gradient_scope(call.scope()), call.location()};
      regions.push_back(result.regions.size());
      result.regions.push_back(std::move(region));
    }
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
      ir::Node* copy = graph.create_node(&call, node.op(), std::move(inputs),
                                         subgraphs_reachable_from(graph, *callee, node),
                                         {types.begin(), types.end()}, std::move(info));
      for (size_t k = 0; k < node.num_outputs(); ++k) {
        mapped[Value(const_cast<ir::Node*>(&node), k)] = copy->output(k);
      }
      if (!regions.empty()) result.outermost[copy] = regions.front();
      if (recomputed != kNone) result.recomputed[copy] = recomputed;
      if (auto bprop = custom.find(&node); bprop != custom.end()) custom[copy] = bprop->second;
      if (recompute.count(&node) != 0) recompute.insert(copy);
      if (call_target(*copy) != nullptr) pending.push_back({copy, callee, regions, recomputed});
    }
    const Value out = mapped.at(callee->outputs()[0]);
    if (regions.size() > next.regions.size()) result.regions[regions.back()].out = out;
    for (size_t k = 0; k < call.num_outputs(); ++k) {
      graph.replace_all_uses(call.output(k), mapped.at(callee->outputs()[k]));
    }
    // Values of the region that the call's uses now read: update regions holding them.
    for (CustomRegion& r : result.regions) {
      if (r.x == call.output(0)) r.x = out;
      if (r.out == call.output(0)) r.out = out;
      for (Value& c : r.captures) {
        if (c == call.output(0)) c = out;
      }
    }
    result.outermost.erase(&call);  // its address may be reused by a later node
    result.recomputed.erase(&call);
    custom.erase(&call);
    recompute.erase(&call);
    graph.erase_node(&call);
  }
  return result;
}

// The traced bprop of `region` appended to `graph` on (x, out, dout, captures): the gradient of x.
Value apply_bprop(ir::Graph& graph, const CustomRegion& region, Value dout) {
  const ir::Graph& bprop = *region.bprop;
  MF_CHECK(bprop.num_parameters() == 3 + region.captures.size(), Internal, "bprop @", bprop.name(),
           " takes ", bprop.num_parameters(), " parameters, expected ", 3 + region.captures.size());
  std::unordered_map<Value, Value, ir::ValueHash> mapped;
  mapped[Value(bprop.parameter(0))] = region.x;
  mapped[Value(bprop.parameter(1))] = region.out;
  mapped[Value(bprop.parameter(2))] = dout;
  for (size_t i = 0; i < region.captures.size(); ++i) {
    mapped[Value(bprop.parameter(3 + i))] = region.captures[i];
  }
  for (size_t c = 0; c < bprop.num_constants(); ++c) {
    const ir::Constant* constant = bprop.constant(c);
    mapped[Value(bprop.constant(c))] = graph.add_constant(constant->type(), constant->bytes());
  }
  for (const ir::Node& node : bprop.nodes()) {
    MF_CHECK(call_target(node) == nullptr &&
                 !(node.def() != nullptr && node.def()->has(ir::Trait::kControlFlow)),
             InvalidArgument, "the bprop at ", region.info.scope,
             " calls a cell or uses control flow; a bprop is differentiated as plain ops");
    std::vector<Value> inputs;
    for (const Value& v : node.inputs()) inputs.push_back(mapped.at(v));
    ir::NodeInfo info{ir::gradient_scope(node.scope()), node.location()};
    const auto types = node.output_types();
    ir::Node* copy = graph.create_node(nullptr, node.op(), std::move(inputs), node.attrs(),
                                       {types.begin(), types.end()}, std::move(info));
    for (size_t k = 0; k < node.num_outputs(); ++k) {
      mapped[Value(const_cast<ir::Node*>(&node), k)] = copy->output(k);
    }
  }
  const Value dx = mapped.at(bprop.outputs()[0]);
  MF_CHECK(dx.type() == region.x.type(), InvalidArgument, "the bprop at ", region.info.scope,
           " returns a gradient of type ", ir::type_to_string(dx.type()), " for an input of type ",
           ir::type_to_string(region.x.type()), " (set check_bprop=True to have it checked)");
  return dx;
}

// Points the backward's reads of a recomputed cell's values at copies of the cell's nodes. The
// copies of one call of the cell go just before the first backward node that reads any of them,
// so they run (and their memory is taken) only then; the forward's nodes are left to their
// forward readers and freed after them. Only the nodes the backward needs, and what they are
// computed from inside the cell, are copied; values from outside the cell, and the cell's own
// outputs, are read as they are.
void recompute_activations(ir::Graph& graph, const std::unordered_set<const ir::Node*>& forward,
                           const std::unordered_map<const ir::Node*, size_t>& recomputed) {
  if (recomputed.empty()) return;
  std::vector<ir::Node*> backward;
  for (ir::Node& node : graph.nodes()) {
    if (forward.count(&node) == 0) backward.push_back(&node);
  }
  // A value the cell hands on to the forward (its output) stays alive for its forward readers,
  // which usually keep it for their own backward: it is read as it is, never computed twice.
  std::unordered_set<const ir::Node*> handed_on;
  for (const auto& [node, call] : recomputed) {
    for (size_t k = 0; k < node->num_outputs() && handed_on.count(node) == 0; ++k) {
      for (const ir::Use& use : node->uses(k)) {
        const auto reader = use.user == nullptr ? recomputed.end() : recomputed.find(use.user);
        const bool inside = reader != recomputed.end() && reader->second == call;
        if (!inside && (use.user == nullptr || forward.count(use.user) != 0)) {
          handed_on.insert(node);
          break;
        }
      }
    }
  }
  const auto copied = [&](const ir::Node* n) {
    return n != nullptr && recomputed.count(n) != 0 && handed_on.count(n) == 0;
  };
  std::unordered_map<const ir::Node*, ir::Node*> copies;
  for (ir::Node* reader : backward) {
    for (size_t i = 0; i < reader->num_inputs(); ++i) {
      const Value v = reader->input(i);
      if (!copied(v.node())) continue;
      if (copies.count(v.node()) == 0) {
        // The nodes of this call the value needs, gathered without recursion, then copied in
        // program order (inputs first) just before `reader`.
        const size_t call = recomputed.at(v.node());
        std::unordered_set<const ir::Node*> needed;
        std::vector<const ir::Node*> stack{v.node()};
        while (!stack.empty()) {
          const ir::Node* n = stack.back();
          stack.pop_back();
          if (copies.count(n) != 0 || !needed.insert(n).second) continue;
          for (const Value& in : n->inputs()) {
            if (copied(in.node()) && recomputed.at(in.node()) == call) stack.push_back(in.node());
          }
        }
        for (ir::Node& n : graph.nodes()) {
          if (needed.count(&n) == 0) continue;
          std::vector<Value> inputs;
          for (const Value& in : n.inputs()) {
            auto copy = in.node() == nullptr ? copies.end() : copies.find(in.node());
            inputs.push_back(copy == copies.end() ? in : copy->second->output(in.index()));
          }
          const auto types = n.output_types();
          copies[&n] = graph.create_node(reader, n.op(), std::move(inputs), n.attrs(),
                                         {types.begin(), types.end()},
                                         {recompute_scope(n.scope()), n.location()});
        }
      }
      graph.set_input(reader, i, copies.at(v.node())->output(v.index()));
    }
  }
}

// True when `graph` or a subgraph of it holds one of `nodes`.
bool holds_any(const ir::Graph& graph,
               const std::unordered_map<const ir::Node*, CustomBprop>& nodes) {
  if (nodes.empty()) return false;
  for (const ir::Node& node : graph.nodes()) {
    if (nodes.count(&node) != 0) return true;
  }
  for (const ir::Graph* sub : graph.subgraphs()) {
    if (holds_any(*sub, nodes)) return true;
  }
  return false;
}

// The backward of y = cond(pred, x...): a cond on the same predicate whose branches are copies of
// the forward branches differentiated with respect to the wanted x (each computing its forward
// again), given x..., dy, then the sums the graph has begun for the wanted x, which each branch
// continues; its outputs replace those sums. The taken branch's contributions are so added in the
// tape's order, for the same bits.
void differentiate_cond(ir::Graph& graph, ir::Node& node, Value dout,
                        const std::vector<bool>& wants, GradientSums& sums,
                        const GradRequest& request) {
  MF_CHECK(node.num_outputs() == 1, Unsupported, "the gradient of a cond of ", node.num_outputs(),
           " outputs at ", node.scope(), " is not supported; return one tensor from its branches");
  std::vector<size_t> wanted;  // node inputs (1.. : the branch parameters)
  for (size_t i = 1; i < node.num_inputs(); ++i) {
    if (wants[i] && ir::is_floating(node.input(i).type().dtype)) wanted.push_back(i);
  }
  if (wanted.empty()) return;
  GradRequest branch_request;
  for (size_t i : wanted) {
    branch_request.wrt.push_back(i - 1);
    branch_request.seeded_wrt.push_back(bool(sums.find(node.input(i))));
  }
  branch_request.sens_param = true;
  branch_request.keep_outputs = false;
  ir::Attrs attrs;
  for (const char* branch_attr : {"then_branch", "else_branch"}) {
    const std::string& name = std::get<std::string>(node.attrs().at(branch_attr));
    const ir::Graph* branch = graph.resolve_subgraph(name);
    MF_CHECK(branch != nullptr, InvalidArgument, "cond at ", node.scope(), ": no subgraph @",
             echo(name, 80));
    MF_CHECK(!holds_any(*branch, request.custom_bprops), Unsupported, "cond at ", node.scope(),
             ": a cell with a custom bprop inside a branch is not differentiated; call it outside "
             "the cond");
    ir::Graph* backward =
        graph.add_subgraph_copy(fresh_subgraph_name(graph, branch->name() + "_grad"), *branch);
    differentiate(*backward, branch_request);
    attrs[branch_attr] = backward->name();
  }
  std::vector<Value> inputs(node.inputs().begin(), node.inputs().end());
  inputs.push_back(dout);
  std::vector<ir::TensorType> types;
  for (size_t i : wanted) {
    types.push_back(node.input(i).type());
    if (Value begun = sums.find(node.input(i))) inputs.push_back(begun);
  }
  const ir::NodeInfo info{ir::gradient_scope(node.scope()), node.location()};
  ir::Node* grad =
      graph.create_node(nullptr, "cond", std::move(inputs), std::move(attrs), types, info);
  for (size_t k = 0; k < wanted.size(); ++k) {
    const Value x = node.input(wanted[k]);
    if (sums.find(x)) {
      sums.set(x, grad->output(k));
    } else {
      sums.add(x, grad->output(k), info);
    }
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

std::string recompute_scope(std::string_view forward_scope) {
  return std::string(kRecomputePrefix) + std::string(forward_scope);
}

bool is_recomputed(const ir::Node& node) {
  return node.scope().starts_with(kRecomputePrefix);
}

void differentiate(ir::Graph& graph, const GradRequest& request) {
  const Flattened flat = flatten_calls(graph, request.custom_bprops, request.recompute_calls);
  std::unordered_map<const ir::Node*, size_t> anchors;  // the node making a region's output
  for (size_t r = 0; r < flat.regions.size(); ++r) {
    if (flat.regions[r].out.node() != nullptr) anchors[flat.regions[r].out.node()] = r;
  }
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
    if (auto anchor = anchors.find(&node); anchor != anchors.end()) {
      const CustomRegion& region = flat.regions[anchor->second];
      if (active.count(region.x) != 0 && ir::is_floating(region.out.type().dtype)) {
        active.insert(region.out);
      }
    }
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
  MF_CHECK(request.seeded_wrt.empty() || request.seeded_wrt.size() == wrt.size(), Internal,
           "seeded_wrt has ", request.seeded_wrt.size(), " entries for ", wrt.size(), " wrt");
  for (size_t k = 0; k < request.seeded_wrt.size(); ++k) {
    if (!request.seeded_wrt[k]) continue;
    sums.add(Value(wrt[k]), graph.add_parameter("begun" + std::to_string(k), wrt[k]->type()),
             seed_info);
  }
  if (active.count(y) != 0) sums.add(y, seed, seed_info);
  // Backward: nodes in reverse program order; each rule's input gradients in input order.
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Node& node = **it;
    if (auto inside = flat.outermost.find(&node); inside != flat.outermost.end()) {
      // A custom bprop replaces the backward of its cell's ops: applied where its output is made.
      const CustomRegion& region = flat.regions[inside->second];
      if (region.out.node() != &node || active.count(region.x) == 0) continue;
      const Value dout = sums.find(region.out);
      if (!dout) continue;
      sums.add(region.x, apply_bprop(graph, region, dout), region.info);
      continue;
    }
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
    if (node.op() == "cond") {
      differentiate_cond(graph, node, douts[0], wants, sums, request);
      continue;
    }
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
  recompute_activations(graph, {forward.begin(), forward.end()}, flat.recomputed);
  if (!request.keep_outputs) graph.clear_outputs();
  for (Value g : results) graph.add_output(g);
}

}  // namespace mf::passes
