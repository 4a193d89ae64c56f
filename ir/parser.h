#pragma once
// Reads the text IR that ir/printer.h writes, exactly: print(parse(print(g))) == print(g). A
// malformed file fails with InvalidArgument "FILE:LINE:COL: expected X, found Y"; it never crashes.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/input_signature.h"

namespace mf::ir {

// Parses a whole module: the first block is the entry graph, later blocks are its subgraphs by
// path. Every op must be registered; declared types are checked against inference. `filename` only
// labels error positions.
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename = "<string>");
// Symbolic dimensions, as the dump of a graph with dynamic inputs writes them: a dimension (or an
// integer of an attribute) may be a symbol, a product of symbols and integers (`4 * batch`), or
// '?' in a type (any size). The entry graph's parameters declare the inputs and bind the symbols:
// each takes its shape from `input_shapes` (checked against the declaration, InvalidArgument
// naming the input and axis) or, when absent, 1 for every unbound symbol; every other size is
// then evaluated. `signature`, when given, receives the declarations.
struct ParseBinding {
  std::map<std::string, Shape> input_shapes;
  std::vector<InputSignature>* signature = nullptr;
};
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename,
                                   const ParseBinding& binding);

// NotFound when the file cannot be read.
std::unique_ptr<Graph> parse_graph_file(const std::string& path);

}  // namespace mf::ir
