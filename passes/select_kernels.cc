// select-kernels: makes sure every node can run on this build before any memory is planned, so a
// missing kernel is a compile error naming the node, not a failure halfway through a run.

#include "base/error.h"
#include "ir/printer.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

// Checks that every node's op has a CPU kernel or is control flow (run by the executor itself).
// Promise: never changes the graph; throws Unsupported naming the node, its op and its scope.
class SelectKernels final : public Pass {
 public:
  std::string_view name() const override { return "select-kernels"; }

  bool run(ir::Graph& graph) override {
    for_each_graph(graph, [](ir::Graph& g) {
      for (const ir::Node& node : g.nodes()) check(g, node);
    });
    return false;
  }

 private:
  static void check(const ir::Graph& graph, const ir::Node& node) {
    // Described only on failure: describe_node numbers the whole graph, so describing every node
    // made this pass quadratic (a chain of 20,000 nodes spent seconds here).
    auto where = [&] {
      return ir::describe_node(graph, node) +
             (node.scope().empty() ? "" : " (scope " + node.scope() + ")") +
             (graph.parent() ? " in subgraph @" + graph.name() : "");
    };
    MF_CHECK(node.def() != nullptr, NotFound, where(), ": op '", node.op(),
             "' is not registered, so no kernel can run it");
    MF_CHECK(node.def()->has(ir::Trait::kControlFlow) || static_cast<bool>(node.def()->kernel),
             Unsupported, where(), ": op '", node.op(),
             "' has no CPU kernel in this build; expand it into ops that have one or remove it");
  }
};

}  // namespace

std::unique_ptr<Pass> make_select_kernels() {
  return std::make_unique<SelectKernels>();
}

}  // namespace mf::passes
