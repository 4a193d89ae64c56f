#pragma once
// The unit of graph rewriting: one small class with a kebab-case name and run(graph) -> changed.
// Verification, timing, dumping and error context live in the Pipeline, never inside a pass.

#include <string_view>

#include "ir/graph.h"

namespace mf::passes {

// One rewrite over a whole graph (subgraphs included when the pass says so).
// Promise: run() returns true iff it changed the graph, and leaves a graph that verifies.
class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;  // "constant-folding"
  virtual bool run(ir::Graph& graph) = 0;
};

// Calls fn on `graph` and on every subgraph below it, parents first.
template <typename Fn>
void for_each_graph(ir::Graph& graph, Fn&& fn) {
  fn(graph);
  for (ir::Graph* sub : graph.subgraphs()) for_each_graph(*sub, fn);
}

// Attributes holding a subgraph's name, by the verifier's convention: "graph", or ending in
// "_graph" or "_branch".
inline bool names_subgraph(std::string_view attr) {
  return attr == "graph" || attr.ends_with("_graph") || attr.ends_with("_branch");
}

}  // namespace mf::passes
