#pragma once
// jit_config.infer_boost=on: the compiled graph is an inference graph. Each weight parameter's
// uses are replaced by a constant holding the weight's current bytes, so the passes fold what
// depends on weights alone (a batch norm's scale and shift, transposed or reshaped weights) and
// the kernels prepare constant weights once (runtime/prepared_kernels.h: convolution weights
// reordered into the primitive's layout at compile time, not on every call).
//
// The parameters themselves stay, unused, so the graph's signature and its callers' bindings do
// not change. What was frozen is remembered by identity: a later run that binds a different
// tensor to a frozen weight (the user replaced a parameter) compiles again instead of running
// with the old values.

#include <functional>
#include <memory>
#include <vector>

#include "engine/tensor.h"
#include "ir/graph.h"

namespace mf::engine {

struct FrozenWeights {
  // The tensors compiled in, in the order freeze_weights met them; kept alive so their addresses
  // are not reused by other tensors while the compiled graph exists.
  std::vector<std::shared_ptr<TensorImpl>> tensors;
  // Each tensor's buffer and its write version when frozen: a weight written in place since (a
  // training step) compiles again too.
  std::vector<const runtime::Buffer*> buffers;
  std::vector<uint64_t> versions;
  size_t bytes = 0;

  // True when `current` (the same weights looked up again, in the same order) are the frozen
  // tensors themselves.
  bool same_as(const std::vector<Tensor>& current) const;
};

// Freezes every weight parameter (ir::Parameter::is_weight) of `graph` whose tensor `weight_of`
// returns (an undefined Tensor leaves that parameter bound at run time). Waits for the tensors.
FrozenWeights freeze_weights(ir::Graph& graph,
                             const std::function<Tensor(const ir::Parameter&)>& weight_of);

// The tensors `weight_of` returns for `graph`'s weight parameters now, in freeze_weights' order.
std::vector<Tensor> current_weights(const ir::Graph& graph,
                                    const std::function<Tensor(const ir::Parameter&)>& weight_of);

}  // namespace mf::engine
