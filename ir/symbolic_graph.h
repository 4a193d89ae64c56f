#pragma once
// One compiled graph for every size of its dynamic inputs. The graph is compiled at two bindings
// of the input symbols (the first call's sizes, and a probe of distinct primes); where the two
// compiles agree everything but sizes, one of them serves every binding: each size in an
// attribute that differs is written as an expression of the symbols (`factor * batch * seq`, as
// a reshape's target carries), and binding sizes is substituting them and re-running shape
// inference, node by node, into fused bodies. Where the compiles differ otherwise (an op chosen
// by size, a constant made from a size, control flow), generalize() says why and the caller
// compiles per size instead. Re-inference at the probe must reproduce the probe's compile, or the
// graph is not used: a wrong generalization is refused, never run.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/graph.h"
#include "ir/input_signature.h"

namespace mf::ir {

// factor * the product of the symbols' values.
struct SizeExpr {
  int64_t factor = 1;
  std::vector<std::string> symbols;
  // The value under `values`; InvalidArgument when it overflows or a symbol is unbound.
  int64_t evaluate(const SymbolValues& values) const;
  std::string to_string() const;  // "8 * seq", "batch * seq"
};

// A size in an attribute of a node: element `index` of an integer list (-1: a single integer).
struct SizePatch {
  std::vector<std::string> graph_path;  // subgraph names from the top graph
  int64_t node_id = 0;
  std::string attr;
  int64_t index = -1;
  SizeExpr size;
};

struct SymbolicGraph {
  std::unique_ptr<Graph> graph;          // the compile at the first binding
  std::vector<InputSignature> inputs;    // one per input parameter; every dynamic dimension named
  std::vector<size_t> input_parameters;  // the parameter each of `inputs` declares
  std::vector<SizePatch> patches;
  // The graph in the text format with every size that depends on the symbols written as its
  // expression (`<Tensor[Float32], (batch, 784)>`, `{shape=[batch * seq, 256]}`): the dump.
  std::string text;
  // The signature and each size written as an expression, one per line (for dumps and reports).
  std::string describe() const;
};

// `first` (at the first binding) and `probe` (at the probe) as factor * a product of symbols, or
// nothing; the probe's distinct primes leave at most one product that fits.
std::optional<SizeExpr> find_size_expr(int64_t first, int64_t probe,
                                       const SymbolValues& first_values,
                                       const SymbolValues& probe_values);

// The two bindings a symbolic compile is made at: every dynamic dimension named, the symbols'
// values at the first call's shapes (checked against the declaration) and at the probe.
struct ProbePlan {
  std::vector<InputSignature> inputs;
  SymbolValues first, probe;
  std::vector<Shape> probe_shapes;
};
ProbePlan plan_probe(const std::vector<InputSignature>& declared,
                     const std::vector<Shape>& first_shapes);

// Probe sizes for the symbols of `inputs`: distinct primes, none equal to `avoid`'s values or a
// known dimension, so a size seen at both bindings factors one way only.
SymbolValues probe_values(const std::vector<InputSignature>& inputs, const SymbolValues& avoid);

// Unnamed dimensions given their own symbols ("?1", "?2", ...; printed "?"), so every dynamic
// dimension can be bound and expressed.
std::vector<InputSignature> name_every_dimension(std::vector<InputSignature> inputs);

// The generalization of `first` (compiled at `first_values`) and `probe` (at `probe_values`), or
// why there is none. `input_parameters[i]` is the parameter `inputs[i]` declares in both graphs.
std::variant<SymbolicGraph, std::string> generalize(std::unique_ptr<Graph> first,
                                                    const SymbolValues& first_values,
                                                    const Graph& probe,
                                                    const SymbolValues& probe_values,
                                                    std::vector<InputSignature> inputs,
                                                    std::vector<size_t> input_parameters);

// The first difference in structure or types between two graphs that should be one graph at one
// binding (node by node, into subgraphs), or "".
std::string first_type_difference(const Graph& a, const Graph& b);

// A copy of the symbolic graph at `shapes` (one per input, checked against the declarations):
// sizes substituted and every node's types re-inferred. A size the network does not allow is the
// error its op's shape rule gives, naming the node.
std::unique_ptr<Graph> specialize(const SymbolicGraph& symbolic, const std::vector<Shape>& shapes);

}  // namespace mf::ir
