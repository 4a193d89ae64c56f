#pragma once
// The memory planner: lowers a verified graph to a runtime::Plan (steps in topological order, a
// slot per value, lifetimes, dependencies for inter-op parallelism). memory_level O0 gives each
// intermediate its own pooled buffer released after its last use; O1 packs intermediates into one
// arena by lifetime intervals (greedy best-fit, SOMAS-like) with in-place reuse, unless
// memory_reuse is false.

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/compile_options.h"
#include "runtime/plan.h"

namespace mf::passes {

// Control-flow nodes (call/cond/while) get subplans for the subgraphs they name, planned
// recursively with the same options. Throws mf::Error (NotFound) when a named subgraph is missing.
runtime::Plan plan_memory(const ir::Graph& graph, const CompileOptions& options);

// The bytes a slot of `type` takes: its elements, rounded up to runtime::kTensorAlignment.
size_t slot_bytes(const ir::TensorType& type);

// The subgraph-naming string attributes of a control-flow op, in the order the op declares them
// (call: graph; cond: then_branch, else_branch; while: cond_graph, body_graph). The executors index
// Step::subplans in this order.
std::vector<std::string> subgraph_names(const ir::Node& node);

}  // namespace mf::passes
