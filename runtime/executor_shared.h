#pragma once
// Internals the two graph executors share (not part of the public API; use graph_executor.h):
// running a plan serially at a call depth, control flow, input checks and error context.
// SinkExecutor runs control-flow steps through run_control_flow, i.e. through nested
// KernelExecutor-style runs.

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/graph_executor.h"

namespace mf::runtime::detail {

MemoryPool& pool_of(const RunOptions& options);

// InvalidArgument naming the parameter, the declared and the given type (or the missing buffer).
void check_inputs(const Plan& plan, std::span<const TensorArg> inputs);

// The bytes a value of `type` actually holds (Slot::bytes is rounded up to the alignment).
size_t payload_bytes(const ir::TensorType& type);

// Copies a value of `type` from `from` to `to`; nothing for an empty one, whose buffers may be null
// (memcpy's pointers may not: UBSan).
void copy_payload(void* to, const void* from, const ir::TensorType& type);

// The slot ids of `ids` once each, ascending (a step reading one value twice reads it once).
std::vector<int> distinct_slots(const std::vector<int>& ids);

// Per slot, how many steps of `plan` read it: with inter-op parallelism a pooled value goes back
// to the pool when the last of them finishes (the plan's release_after assumes serial order).
std::vector<int> reader_counts(const Plan& plan);

// Whether pooled output slot `out` of `step` takes input 0's buffer instead of a new one (memory
// O0's in-place steps, passes/plan_memory.cc): in a serial run (`readers` null) always, in a
// parallel run once this step is input 0's last reader still to finish (`readers`: the run's
// per-slot counts of readers not yet finished), since one earlier in program order may still be
// running.
inline bool takes_input_buffer(const Step& step, int out, const std::atomic<int>* readers) {
  return step.in_place && out == step.outputs[0] &&
         (readers == nullptr || readers[step.inputs[0]].load() == 1);
}

// Nonzero scalar = true, whatever the dtype.
bool scalar_truth(const void* data, ir::DType dtype);

// "at node %3 = add(%1, %2) in graph @main (scope: ..., location: ...)".
std::string node_context(const Plan& plan, const Step& step);

// Call inside a catch block: rethrows the current exception as mf::Error with node_context added
// (anything else than mf::Error becomes Internal).
[[noreturn]] void rethrow_at(const Plan& plan, const Step& step);

// Runs `plan` on the calling thread, in step order, at call depth `depth` (the top-level run is 0).
std::vector<TensorArg> run_plan(const Plan& plan, std::span<const TensorArg> inputs,
                                const RunOptions& options, int depth);

// Runs control-flow step `step` of `plan` (call/cond/while) on its operands; `depth` is the depth
// of `plan`'s run, the subplans run at depth + 1, which must not exceed options.max_call_depth.
// Results may be buffers of `args` themselves (a while loop that ran zero times): callers copy
// those.
std::vector<TensorArg> run_control_flow(const Plan& plan, const Step& step,
                                        std::span<const TensorArg> args, const RunOptions& options,
                                        int depth);

}  // namespace mf::runtime::detail
