#pragma once
// Helpers shared by the memory planner's tests and the plan checker's: a float32 type and a plan
// of a graph at a memory level.

#include "ir/graph.h"
#include "passes/plan_memory.h"

namespace mf::passes::testing {

inline ir::TensorType f32(ir::Shape shape) {
  return {ir::DType::kFloat32, std::move(shape)};
}

inline runtime::Plan plan(const ir::Graph& g, MemoryLevel level, bool reuse = true) {
  CompileOptions options;
  options.memory_level = level;
  options.memory_reuse = reuse;
  return plan_memory(g, options);
}

}  // namespace mf::passes::testing
