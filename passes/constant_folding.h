#pragma once
// The constant folder, shared by the constant-folding pass (make_constant_folding, passes.h) and
// by the ONNX importer, which folds while it builds the graph: one folder, one set of trait checks,
// and a folded value computed by the op's own kernel either way.

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace mf::passes {

// Whether `node` may be folded: its op is pure, kernel-backed, neither side-effecting nor control
// flow, every operand is a constant, and its outputs hold at most `max_elements` elements in all.
// (Whether folding is worth it, e.g. that the node has uses, is the caller's business.)
bool foldable(const ir::Node& node, int64_t max_elements);

// Evaluates a foldable `node` with its kernel (deterministically: a folded value must not depend on
// the compiling machine's thread count), replaces every use of its outputs by new constants holding
// them, erases the node and returns the constants in output order. What the kernel throws
// propagates and leaves the graph as it was.
std::vector<ir::Value> fold_node(ir::Graph& graph, ir::Node& node);

}  // namespace mf::passes
