// infer-shapes: re-runs type and shape inference on every node, in order, so the types a tracer
// (or a hand-written .ir file) stored agree with what the ops say.

#include <vector>

#include "base/error.h"
#include "ir/printer.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

// Re-infers every non-control-flow node; stores new types (and missing attribute defaults) where
// they differ. Promise: afterwards every node's stored types are the inferred ones, or it threw
// naming the node; a call's inputs and outputs match its callee's signature.
class InferShapes final : public Pass {
 public:
  std::string_view name() const override { return "infer-shapes"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](ir::Graph& g) {
      for (ir::Node* node : g.topological_order()) changed |= infer(g, *node);
    });
    return changed;
  }

 private:
  static bool infer(ir::Graph& graph, ir::Node& node) {
    MF_CHECK(node.def() != nullptr, NotFound, ir::describe_node(graph, node), ": op '", node.op(),
             "' is not registered");
    // Control flow takes its types from subgraphs, which its OpDef cannot see.
    if (node.def()->has(ir::Trait::kControlFlow)) {
      check_call(graph, node);
      return false;
    }
    std::vector<ir::TensorType> inputs;
    for (const ir::Value& v : node.inputs()) inputs.push_back(v.type());
    ir::Attrs attrs = node.attrs();
    std::vector<ir::TensorType> inferred;
    try {
      inferred = node.def()->infer_types(inputs, attrs);
    } catch (Error& e) {
      e.add_context("at " + ir::describe_node(graph, node));
      throw;
    }
    bool changed = false;
    if (attrs != node.attrs()) {
      for (auto& [name, value] : attrs) node.set_attr(name, value);
      changed = true;
    }
    const auto stored = node.output_types();
    if (!std::equal(stored.begin(), stored.end(), inferred.begin(), inferred.end())) {
      graph.reinfer(&node);
      changed = true;
    }
    return changed;
  }

  // A call's operands feed the callee's parameters and its outputs are the callee's outputs.
  static void check_call(const ir::Graph& graph, const ir::Node& node) {
    auto it = node.attrs().find("graph");
    if (it == node.attrs().end()) return;
    const auto* callee_name = std::get_if<std::string>(&it->second);
    if (callee_name == nullptr) return;
    const ir::Graph* callee = graph.resolve_subgraph(*callee_name);
    MF_CHECK(callee != nullptr, InvalidArgument, ir::describe_node(graph, node),
             ": calls subgraph @", *callee_name, ", which does not exist");
    MF_CHECK(callee->num_parameters() == node.num_inputs(), InvalidArgument,
             ir::describe_node(graph, node), ": passes ", node.num_inputs(), " operands to @",
             *callee_name, ", which takes ", callee->num_parameters());
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      MF_CHECK(node.input(i).type() == callee->parameter(i)->type(), InvalidArgument,
               ir::describe_node(graph, node), ": operand ", i, " is ",
               ir::type_to_string(node.input(i).type()), " but parameter ",
               callee->parameter(i)->name(), " of @", *callee_name, " is ",
               ir::type_to_string(callee->parameter(i)->type()));
    }
    MF_CHECK(callee->outputs().size() == node.num_outputs(), InvalidArgument,
             ir::describe_node(graph, node), ": has ", node.num_outputs(), " outputs but @",
             *callee_name, " returns ", callee->outputs().size());
    for (size_t k = 0; k < node.num_outputs(); ++k) {
      MF_CHECK(callee->outputs()[k].type() == node.output_type(k), InvalidArgument,
               ir::describe_node(graph, node), ": output ", k, " is ",
               ir::type_to_string(node.output_type(k)), " but @", *callee_name, " returns ",
               ir::type_to_string(callee->outputs()[k].type()));
    }
  }
};

}  // namespace

std::unique_ptr<Pass> make_infer_shapes() {
  return std::make_unique<InferShapes>();
}

}  // namespace mf::passes
