#pragma once
// The text form of a graph, close to MindSpore's .ir dumps. Deterministic and exact: floats print
// in their shortest round-trip form, so parse(print(g)) rebuilds g bit for bit (see ir/parser.h).

#include <iosfwd>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mf::ir {

// How much to write. Every level parses back; a level only decides what is left out.
enum class Detail : uint8_t {
  kCompact = 1,  // attributes equal to their registered default are left out
  kNormal = 2,   // every attribute
  kFull = 3,     // every attribute and the source location of each node
};

struct PrintOptions {
  Detail detail = Detail::kNormal;
};

// Receives the text of print_graph in pieces, in order. A caller that only needs a function of the
// text (ir::canonical_digest hashes it) takes it this way instead of building the string, so the
// format is defined once, here, whichever way it is consumed.
class TextSink {
 public:
  virtual ~TextSink() = default;
  virtual void append(std::string_view text) = 0;
};

// The whole graph: a header, then `graph` as the entry block and each nested subgraph as its own
// block, named by its path below the entry (`@body`, `@body/inner`).
std::string print_graph(const Graph& graph, PrintOptions options = {});
void print_graph(std::ostream& out, const Graph& graph, PrintOptions options = {});
void print_graph(TextSink& out, const Graph& graph, PrintOptions options = {});
// Writes print_graph to `path`; InvalidArgument when the file cannot be written.
void write_graph_file(const Graph& graph, const std::string& path, PrintOptions options = {});

// One-line description for error messages: `%5 = add(%3, %para1_x)`. Safe on a broken graph: an
// operand that is not in the graph prints as `%<dangling>` and is never dereferenced.
std::string describe_node(const Graph& graph, const Node& node);

// Pieces of the format, shared with the Graphviz export and tests.
std::string format_attr_value(
    const AttrValue& value);             // `true`, `3`, `2.0`, `"a\n"`, `[1, 2]`, `Float32`
std::string format_float(double value);  // shortest round trip, always with '.', 'e', inf or nan
std::string quote_string(std::string_view text);  // `"..."` with C escapes

}  // namespace mf::ir
