#pragma once
// The unit of graph rewriting: one small class with a kebab-case name and run(graph) -> changed.
// Verification, timing, dumping and error context live in the Pipeline, never inside a pass.

#include <string_view>

#include "ir/call_graph.h"
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

using ir::names_subgraph;

}  // namespace mf::passes
