#pragma once
// Executors of a compiled graph. KernelExecutor (jit O0/O1) runs steps in order, allocating each
// tensor from the pool, and with inter_op_parallelism > 1 runs independent steps at once.
// SinkExecutor (O2) decides everything ahead: one arena sized by the plan, every kernel bound to
// its buffers, a run is a flat loop with no allocation, no inference and no lookup per op.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/memory_pool.h"
#include "runtime/plan.h"

namespace mf::runtime {

// One tensor handed to or returned by an executor.
struct TensorArg {
  ir::TensorType type;
  std::shared_ptr<Buffer> buffer;
};

struct RunOptions {
  int intra_op_threads = 1;
  int inter_op_parallelism = 1;
  bool deterministic = false;
  int max_call_depth =
      1000;  // nested call/cond/while deeper than this fails with "exceeds max_call_depth N"
  MemoryPool* pool = nullptr;  // null: default_pool()
  // Called after each step with the node just run (recorder, debugging). May be empty.
  std::function<void(const ir::Node&)> on_step;
};

class GraphExecutor {
 public:
  virtual ~GraphExecutor() = default;
  // Inputs in graph-parameter order, types checked; outputs in graph-output order, each in its own
  // buffer. Errors carry context naming the node (op, scope, location).
  virtual std::vector<TensorArg> run(std::span<const TensorArg> inputs,
                                     const RunOptions& options) = 0;
  virtual std::string_view name() const = 0;  // "KernelExecutor" / "SinkExecutor"
  // Prepares the kernels ahead of the first run (runtime/prepared_kernels.h): their primitives for
  // `threads` intra-op threads, and state built from the graph's constants. Returns how many
  // nodes were prepared. Runs never require it; a run with other threads still works.
  virtual size_t prepare_kernels(int threads, bool deterministic) = 0;
};

std::unique_ptr<GraphExecutor> make_kernel_executor(std::shared_ptr<const Plan> plan);
std::unique_ptr<GraphExecutor> make_sink_executor(std::shared_ptr<const Plan> plan);

}  // namespace mf::runtime
