// dead-code-elimination: removes what nothing needs: unused pure nodes, unused constants, and
// subgraphs that no live node names (left behind by inlining).

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "passes/passes.h"

namespace mf::passes {

namespace {

// Removes unused nodes that cannot be observed, then constants and subgraphs nobody uses.
// Promise: never removes a kSideEffect node, an unregistered op, or a control-flow node whose
// subgraphs (transitively) contain one; graph parameters and outputs are untouched.
class DeadCodeElimination final : public Pass {
 public:
  std::string_view name() const override { return "dead-code-elimination"; }

  bool run(ir::Graph& graph) override {
    bool changed = false;
    for_each_graph(graph, [&](ir::Graph& g) { changed |= erase_dead_nodes(g); });
    changed |= erase_dead_subgraphs(graph);
    for_each_graph(graph, [&](ir::Graph& g) { changed |= g.erase_unused_constants() > 0; });
    return changed;
  }

 private:
  // Reverse program order: erasing a node can only make earlier nodes dead.
  static bool erase_dead_nodes(ir::Graph& graph) {
    std::vector<ir::Node*> order;
    for (ir::Node& node : graph.nodes()) order.push_back(&node);
    bool changed = false;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Node* node = *it;
      if (node->has_uses() || may_have_effects(graph, *node)) continue;
      graph.erase_node(node);
      changed = true;
    }
    return changed;
  }

  static bool may_have_effects(const ir::Graph& graph, const ir::Node& node) {
    const ir::OpDef* def = node.def();
    if (def == nullptr || def->has(ir::Trait::kSideEffect)) return true;
    if (!def->has(ir::Trait::kControlFlow)) return !def->has(ir::Trait::kPure);
    for (const auto& [name, value] : node.attrs()) {
      const auto* target = std::get_if<std::string>(&value);
      if (!names_subgraph(name) || target == nullptr) continue;
      const ir::Graph* sub = graph.resolve_subgraph(*target);
      if (sub == nullptr || graph_has_effects(*sub)) return true;
    }
    return false;
  }

  static bool graph_has_effects(const ir::Graph& graph) {
    return std::any_of(graph.nodes().begin(), graph.nodes().end(),
                       [&](const ir::Node& node) { return may_have_effects(graph, node); });
  }

  // Live graphs: the entry graph and every graph a node of a live graph names. A name resolves
  // only to children of the naming graph or of its ancestors, so a dead graph's subtree is dead.
  static bool erase_dead_subgraphs(ir::Graph& root) {
    std::unordered_set<const ir::Graph*> live{&root};
    std::vector<const ir::Graph*> work{&root};
    while (!work.empty()) {
      const ir::Graph* g = work.back();
      work.pop_back();
      for (const ir::Node& node : g->nodes()) {
        for (const auto& [name, value] : node.attrs()) {
          const auto* target = std::get_if<std::string>(&value);
          if (!names_subgraph(name) || target == nullptr) continue;
          const ir::Graph* sub = g->resolve_subgraph(*target);
          if (sub != nullptr && live.insert(sub).second) work.push_back(sub);
        }
      }
    }
    return erase_unless_live(root, live);
  }

  static bool erase_unless_live(ir::Graph& graph,
                                const std::unordered_set<const ir::Graph*>& live) {
    // One pass over the children: erasing them one by one was quadratic in their number.
    bool changed =
        graph.erase_subgraphs_if([&](const ir::Graph& sub) { return live.count(&sub) == 0; }) > 0;
    for (ir::Graph* sub : graph.subgraphs()) changed |= erase_unless_live(*sub, live);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dead_code_elimination() {
  return std::make_unique<DeadCodeElimination>();
}

}  // namespace mf::passes
