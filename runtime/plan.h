#pragma once
// runtime::Plan: a compiled graph lowered for execution. Every tensor value has a slot (where its
// bytes live: a graph parameter, a constant, its own pooled buffer, or an offset in one arena);
// every node is a step that reads and writes slots. Built by the memory planner
// (passes/plan_memory.*), run by KernelExecutor (O0/O1) and SinkExecutor (O2). A plan points into
// the ir::Graph it was built from and lives no longer than it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace mf::runtime {

enum class SlotKind : uint8_t {
  kParameter,  // bound to the caller's input `index` at run time
  kConstant,   // the bytes of ir::Constant `index`
  kPooled,     // its own buffer from the memory pool, freed after its last use (memory O0, and
               // outputs)
  kArena,      // bytes [offset, offset + bytes) of the run's arena (memory O1)
};

struct Slot {
  ir::TensorType type;
  SlotKind kind = SlotKind::kPooled;
  size_t index = 0;   // parameter or constant index
  size_t offset = 0;  // kArena
  size_t bytes = 0;   // rounded to kTensorAlignment
  bool is_output = false;
};

struct Plan;

struct Step {
  const ir::Node* node = nullptr;  // op, attrs, scope, location
  std::vector<int> inputs;         // slot ids
  std::vector<int> outputs;        // slot ids
  std::vector<int>
      release_after;  // kPooled slots whose last use is this step (not outputs of the graph)
  std::vector<int> depends_on;  // step indices that must finish first (inter-op parallelism)
  bool in_place = false;        // output 0 shares input 0's bytes
  // Control flow (call/cond/while): one plan per subgraph the node names, in attribute order.
  std::vector<std::shared_ptr<const Plan>> subplans;
};

struct Plan {
  const ir::Graph* graph = nullptr;
  std::vector<Slot> slots;
  std::vector<Step> steps;        // a topological order
  std::vector<int> parameters;    // slot of each graph parameter, in order
  std::vector<int> outputs;       // slot of each graph output, in order
  size_t arena_bytes = 0;         // kArena: the arena one run needs
  size_t planned_peak_bytes = 0;  // the most bytes alive at once under this plan (arena + pooled)
  std::string describe() const;   // the memory plan as text, for save_graphs >= 2 dumps
  // How intermediates get their bytes, in the words the plan dump and `mf run` use:
  // kPooledRegime (memory_optimize_level O0: a pooled buffer each, back to the pool after its last
  // reader) or kArenaRegime (O1: offsets in one planned arena, with in-place reuse). Read off the
  // slots (any kArena slot means the arena), so a plan loaded from the compile cache says it too.
  std::string_view memory_regime() const;
};

inline constexpr std::string_view kPooledRegime = "pooled, freed after last use";
inline constexpr std::string_view kArenaRegime = "planned arena";

}  // namespace mf::runtime
