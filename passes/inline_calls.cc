// inline: replaces `call` nodes by a copy of the callee's body, so later passes (folding, CSE,
// DCE) see across function boundaries and the executor runs one flat graph.

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
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
//
// Top-down and linear in what it copies: calls are inlined into the entry graph first, and the
// calls among the copies are inlined in turn (depth first, with the chain of callees being inlined
// as the recursion guard), so a call chain n deep costs O(n). Subgraphs are visited only when a
// node left in a visited graph names them (cond and while bodies, calls that stay); a callee that
// was inlined everywhere is not flattened on its own (dead code removes it). Flattening every
// subgraph callee-first copied each suffix of a chain: 2,000 nested calls took 24 s.
class InlineCalls final : public Pass {
 public:
  std::string_view name() const override { return "inline"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    std::unordered_set<const ir::Graph*> visited{&graph};
    std::vector<ir::Graph*> graphs{&graph};
    while (!graphs.empty()) {
      ir::Graph* g = graphs.back();
      graphs.pop_back();
      changed |= inline_in(*g);
      for (const ir::Node& node : g->nodes()) {
        for (const auto& [name, value] : node.attrs()) {
          const auto* target = std::get_if<std::string>(&value);
          if (!names_subgraph(name) || target == nullptr) continue;
          ir::Graph* sub = g->resolve_subgraph(*target);
          if (sub != nullptr && visited.insert(sub).second) graphs.push_back(sub);
        }
      }
    }
    return changed;
  }

 private:
  // The calls still to look at among the copies of one inlined callee.
  struct Frame {
    std::vector<ir::Node*> calls;
    size_t next = 0;
    const ir::Graph* callee = nullptr;  // null for the graph's own calls
  };

  // Inlines the calls of `graph`, then the calls among the copies, depth first. A callee is never
  // inlined into its own expansion: `on_path` counts the graphs enclosing `graph` and the callees
  // being expanded (an explicit stack: the depth follows the input).
  static bool inline_in(ir::Graph& graph) {
    std::unordered_map<const ir::Graph*, int> on_path;
    for (const ir::Graph* g = &graph; g != nullptr; g = g->parent()) ++on_path[g];
    std::vector<Frame> stack(1);
    for (ir::Node& node : graph.nodes()) {
      if (call_target(node) != nullptr) stack.back().calls.push_back(&node);
    }
    bool changed = false;
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.calls.size()) {
        if (top.callee != nullptr) --on_path[top.callee];
        stack.pop_back();
        continue;
      }
      ir::Node* call = top.calls[top.next++];
      const ir::Graph* callee = graph.resolve_subgraph(*call_target(*call));
      if (callee == nullptr || on_path[callee] > 0 || !is_plain_function(graph, *callee, on_path)) {
        continue;
      }
      Frame expansion;
      expansion.callee = callee;
      for (ir::Node* copied : inline_call(graph, *call, *callee)) {
        if (call_target(*copied) != nullptr) expansion.calls.push_back(copied);
      }
      ++on_path[callee];
      stack.push_back(std::move(expansion));  // `top` is invalid from here
      changed = true;
    }
    return changed;
  }

  static bool is_plain_function(const ir::Graph& caller, const ir::Graph& callee,
                                const std::unordered_map<const ir::Graph*, int>& on_path) {
    if (!callee.subgraphs().empty()) return false;
    for (const ir::Node& node : callee.nodes()) {
      for (const auto& [name, value] : node.attrs()) {
        const auto* target = std::get_if<std::string>(&value);
        if (!names_subgraph(name) || target == nullptr) continue;
        const ir::Graph* resolved = callee.resolve_subgraph(*target);
        if (resolved == &callee || resolved != caller.resolve_subgraph(*target)) return false;
        const auto it = on_path.find(resolved);
        if (it != on_path.end() && it->second > 0) return false;  // recursion
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
