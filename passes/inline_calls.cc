// inline: replaces `call` nodes by a copy of the callee's body, so later passes (folding, CSE,
// DCE) see across function boundaries and the executor runs one flat graph.

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

// The callee of a call node: a control-flow node whose only subgraph attribute is "graph"
// (cond and while name their branches and bodies differently and stay as they are).
const std::string* call_target(const ir::Node& node) {
  if (node.def() == nullptr || !node.def()->has(ir::Trait::kControlFlow)) return nullptr;
  const std::string* target = nullptr;
  for (const auto& [name, value] : node.attrs()) {
    if (!names_subgraph(name)) continue;
    if (name != "graph") return nullptr;
    target = std::get_if<std::string>(&value);
  }
  return target;
}

// Inlines every call whose callee is a plain function: no subgraphs of its own, not recursive,
// and every subgraph its nodes name resolves to the same graph from the caller. Promise: the
// caller computes the same values; nodes keep their scopes (a node without one takes the call's).
class InlineCalls final : public Pass {
 public:
  std::string_view name() const override { return "inline"; }

  bool run(ir::Graph& graph) override {
    std::vector<const ir::Graph*> stack;
    return inline_in(graph, stack);
  }

 private:
  // Callees are flattened before their callers, so one run inlines nested calls all the way.
  bool inline_in(ir::Graph& graph, std::vector<const ir::Graph*>& stack) {
    bool changed = false;
    stack.push_back(&graph);
    for (ir::Graph* sub : graph.subgraphs()) changed |= inline_in(*sub, stack);

    std::deque<ir::Node*> work;
    for (ir::Node& node : graph.nodes()) {
      if (call_target(node) != nullptr) work.push_back(&node);
    }
    while (!work.empty()) {
      ir::Node* call = work.front();
      work.pop_front();
      const ir::Graph* callee = graph.resolve_subgraph(*call_target(*call));
      if (callee == nullptr || !is_plain_function(graph, *callee, stack)) continue;
      for (ir::Node* copied : inline_call(graph, *call, *callee)) {
        if (call_target(*copied) != nullptr) work.push_back(copied);
      }
      changed = true;
    }
    stack.pop_back();
    return changed;
  }

  static bool is_plain_function(const ir::Graph& caller, const ir::Graph& callee,
                                const std::vector<const ir::Graph*>& stack) {
    if (!callee.subgraphs().empty()) return false;
    if (std::find(stack.begin(), stack.end(), &callee) != stack.end()) return false;  // recursion
    for (const ir::Node& node : callee.nodes()) {
      for (const auto& [name, value] : node.attrs()) {
        const auto* target = std::get_if<std::string>(&value);
        if (!names_subgraph(name) || target == nullptr) continue;
        const ir::Graph* resolved = callee.resolve_subgraph(*target);
        if (resolved == &callee || resolved != caller.resolve_subgraph(*target)) return false;
        if (std::find(stack.begin(), stack.end(), resolved) != stack.end()) return false;
      }
    }
    return true;
  }

  // Copies the callee's constants and nodes just before the call, then hands the call's uses to
  // the copies. Returns the copied nodes.
  static std::vector<ir::Node*> inline_call(ir::Graph& graph, ir::Node& call,
                                            const ir::Graph& callee) {
    std::unordered_map<ir::Value, ir::Value, ir::ValueHash> mapped;
    for (size_t i = 0; i < callee.num_parameters(); ++i) {
      mapped[ir::Value(callee.parameter(i))] = call.input(i);
    }
    for (size_t c = 0; c < callee.num_constants(); ++c) {
      const ir::Constant* constant = callee.constant(c);
      mapped[ir::Value(callee.constant(c))] =
          graph.add_constant(constant->type(), constant->bytes());
    }
    std::vector<ir::Node*> copies;
    for (const ir::Node& node : callee.nodes()) {
      std::vector<ir::Value> inputs;
      for (const ir::Value& v : node.inputs()) inputs.push_back(mapped.at(v));
      ir::NodeInfo info = node.info();
      if (info.scope.empty()) info.scope = call.scope();
      if (info.location.empty()) info.location = call.location();
      const auto types = node.output_types();
      ir::Node* copy = graph.create_node(&call, node.op(), std::move(inputs), node.attrs(),
                                         {types.begin(), types.end()}, std::move(info));
      for (size_t k = 0; k < node.num_outputs(); ++k) {
        mapped[ir::Value(const_cast<ir::Node*>(&node), k)] = copy->output(k);
      }
      copies.push_back(copy);
    }
    MF_CHECK(callee.outputs().size() == call.num_outputs(), InvalidArgument, "call of @",
             callee.name(), " has ", call.num_outputs(), " outputs but the subgraph returns ",
             callee.outputs().size());
    for (size_t k = 0; k < call.num_outputs(); ++k) {
      graph.replace_all_uses(call.output(k), mapped.at(callee.outputs()[k]));
    }
    graph.erase_node(&call);
    return copies;
  }
};

}  // namespace

std::unique_ptr<Pass> make_inline_calls() {
  return std::make_unique<InlineCalls>();
}

}  // namespace mf::passes
