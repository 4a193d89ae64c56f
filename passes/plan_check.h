#pragma once
// check_plan: proves a runtime::Plan safe to run on its graph without planning again. A plan read
// back from the compile cache is checked with it instead of being rebuilt: cheaper than the planner
// (no placement search) and a stronger statement than "the planner would do the same", because it
// checks the properties the executors rely on, whoever made the plan.

#include "runtime/plan.h"

namespace mf::passes {

// Throws mf::Error (DataLoss) naming the first violation of:
// - structure: every node of plan.graph is exactly one step, in an order where each input is
//   produced before it is read; each step reads the slots of its node's inputs and writes fresh
//   slots of its node's output types; parameters, constants and graph outputs have their slots;
//   every slot id, index and node is in range; a control-flow step has one subplan per subgraph its
//   node names, planned for that subgraph (checked the same way, each subgraph once);
// - memory: every slot holds its type's bytes; arena slots lie inside the arena, and two arena
//   slots whose bytes meet are never alive at once, except an in-place step's input 0 and
//   output 0; a pooled slot is released once, by a step no earlier than its last reader, and never
//   a graph output;
// - ordering: each step depends on the producers of its inputs, on the previous side-effect or
//   control-flow step when it is one, and, when its output reuses arena bytes, on the producer and
//   readers of the slot that used them before.
void check_plan(const runtime::Plan& plan);

}  // namespace mf::passes
