#pragma once
// Reads the text IR that ir/printer.h writes, exactly: print(parse(print(g))) == print(g). A
// malformed file fails with InvalidArgument "FILE:LINE:COL: expected X, found Y"; it never crashes.

#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mf::ir {

// Parses a whole module: the first block is the entry graph, later blocks are its subgraphs by
// path. Every op must be registered; declared types are checked against inference. `filename` only
// labels error positions.
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename = "<string>");
// NotFound when the file cannot be read.
std::unique_ptr<Graph> parse_graph_file(const std::string& path);

}  // namespace mf::ir
