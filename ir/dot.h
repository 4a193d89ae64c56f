#pragma once
// Graphviz export of one graph: a box per node labelled with its op and output types, ellipses for
// parameters, dashed boxes for constants, nested clusters per scope component, one edge per use.

#include <string>

#include "ir/graph.h"

namespace mf::ir {

// Deterministic: the same graph always gives the same text. Subgraphs are not drawn; export each
// one on its own (Graph::subgraphs()).
std::string to_dot(const Graph& graph);
// InvalidArgument when the file cannot be written.
void write_dot_file(const Graph& graph, const std::string& path);

}  // namespace mf::ir
