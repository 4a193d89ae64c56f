#pragma once
// The op dispatcher: every mf::ops call comes here. In PYNATIVE mode it infers the output types on
// the caller's thread (so shape errors surface at the call site), allocates the outputs from the
// pool, and hands the kernel to the eager executor, which runs it now (pynative_synchronize) or
// later, in order.

#include <source_location>
#include <span>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "ir/attribute.h"
#include "ir/op_def.h"
#include "runtime/eager_executor.h"

namespace mf::engine {

std::vector<Tensor> call_op(std::string_view op, std::span<const Tensor> inputs, ir::Attrs attrs,
                            std::source_location where = std::source_location::current());

// call_op for a caller that gives its inputs up (the op-by-op graph runner, whose values die at
// their last reader). Any elementwise op writes its output over an input that nothing else holds
// when it runs (no tensor handle, no queued op, same type and order as the output), as PyTorch's
// in-place activations do, instead of into a new buffer; giving the inputs up lets that happen in
// synchronous mode too, where the caller's handles would otherwise still hold them. Elementwise
// kernels read each element before writing the same element, so the alias is safe
// (tests/engine/dispatch_test.cc).
std::vector<Tensor> call_op_reusing_inputs(
    std::string_view op, std::vector<Tensor> inputs, ir::Attrs attrs,
    std::source_location where = std::source_location::current());

// Waits until every op submitted so far has run; rethrows a pending asynchronous error.
void sync();

// One operand of a queued kernel: the tensor and the type the kernel sees it as (its own type, or
// its channels-last form, engine/eager/eager_layout.h).
struct KernelOperand {
  std::shared_ptr<TensorImpl> impl;
  ir::TensorType kernel_type;
  // An input the op's one output may be written over (OpDef::may_write_over_input) if, when the
  // task runs, only the task still holds it: as PyTorch's in-place activations write.
  bool output_may_take_it = false;
};

// Queues `def`'s kernel on the eager executor (run now under pynative_synchronize). The outputs'
// memory is taken when the task runs; their ready_seq is set here. For call_op and the layout
// conversions it queues.
void submit_kernel(const ir::OpDef& def, ir::Attrs attrs, std::vector<KernelOperand> inputs,
                   std::vector<KernelOperand> outputs, bool deterministic, runtime::TaskInfo info);

}  // namespace mf::engine
