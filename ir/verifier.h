#pragma once
// Checks a graph's invariants after construction or a rewrite: operands defined before use and in
// the graph, use lists exact, no cycles, arity and types agreeing with inference, outputs and
// subgraph references defined. Throws the first problem found, naming the node (`%5 = add(%3,
// %4)`).

#include "ir/graph.h"

namespace mf::ir {

// InvalidArgument for what a user's graph or file can get wrong (types, arity, unknown ops, missing
// subgraphs); Internal for broken structure that only a buggy rewrite produces (dangling operands,
// use lists, cycles, order). Subgraphs are verified too, with "in subgraph @name" as context.
void verify(const Graph& graph);

}  // namespace mf::ir
