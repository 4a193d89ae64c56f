#pragma once
// The call graph: which subgraphs a graph's call, cond and while nodes run, and how deep their
// calls nest.

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mf::ir {

// Attributes holding a subgraph's name, by convention: "graph", or ending in "_graph" or
// "_branch" (call's graph, cond's then_branch / else_branch, while's cond_graph / body_graph).
inline bool names_subgraph(std::string_view attr) {
  return attr == "graph" || attr.ends_with("_graph") || attr.ends_with("_branch");
}

// How deep calls nest below `graph` (the entry is level 1; a call, cond or while body is one level
// below its node's graph), as the op-by-op interpreter counts against max_call_depth. Each cond
// counts the deeper branch. `recursive` when a subgraph reaches itself: its depth depends on the
// values, and is checked as the calls run. Iterative: any nesting is measured without recursion.
struct CallDepth {
  int64_t depth = 1;
  std::string deepest;  // the graph at the bottom of the deepest chain
  bool recursive = false;
};
CallDepth call_depth(const Graph& graph);

}  // namespace mf::ir
