#pragma once
// Channels-last tensors between eager ops: PyTorch's channels_last memory format, chosen by the
// engine rather than the user.
//
// Op by op, a float32 convolution runs oneDNN's direct kernels in channels-last order (runtime/
// ops/conv.cc) and, given NCHW tensors, reorders x in and y out around every call: on
// mobilenet_v2 and squeezenet those reorders and the slower plain 1x1 path were a third of an
// op-by-op run. So an eager convolution that reorders anyway, and every convolution or pool whose
// input is already channels-last, leaves its output in (N, H, W, C) order, flagged on the tensor
// (TensorImpl::channels_last); the tensor's shape stays (N, C, H, W). The ops that read that
// order as it is (the same rules as the format-transform pass, passes/format_transform.cc: conv2d,
// max_pool2d, avg_pool2d, elementwise ops over equal shapes, scalars and per-channel operands,
// concat) keep it; any other op, and every read of the data (Tensor::raw_data, a GRAPH run's
// inputs), gets an NCHW copy made once per tensor. The kernels are the ones the format-transform
// pass uses, so results have the bits they have in GRAPH mode at O1.

#include <source_location>
#include <span>
#include <vector>

#include "engine/tensor.h"
#include "ir/attribute.h"
#include "ir/op_def.h"

namespace mf::engine {

// (N, C, H, W) -> (N, H, W, C) sizes, and back.
ir::Shape nhwc_of(const ir::Shape& nchw);
ir::Shape nchw_of(const ir::Shape& nhwc);

// A rank-4 shape whose NCHW and NHWC orders are the same bytes (one channel, or a 1x1 plane).
bool same_in_both_orders(const ir::Shape& nchw);

// How one eager call treats where its inputs live.
struct EagerLayout {
  enum class Convert { kNone, kToPlain, kToChannelsLast };
  std::vector<Convert> convert;               // per input: a copy in the other order first
  std::vector<ir::TensorType> kernel_inputs;  // the types the kernel sees, after conversion
  std::vector<ir::TensorType> kernel_outputs;
  ir::Attrs attrs;                     // the kernel's (data_format, a concat's axis)
  bool outputs_channels_last = false;  // the outputs are stored (N, H, W, C)

  // Whether an output of (N, C, H, W) shape `nchw` is flagged channels-last: one with a single
  // channel or a 1x1 plane has the same bytes in both orders, so it is plain.
  bool flags_output(const ir::Shape& nchw) const {
    return outputs_channels_last && !same_in_both_orders(nchw);
  }
};

// The plan for `def` over `inputs` (their user-visible types; `channels_last` says which are
// stored so) with `attrs` as inference left them (defaults filled) and the inferred `outputs`.
// With `keep_channels_last` false (disable_format_transform), channels-last inputs are made
// plain and nothing new is stored channels-last.
EagerLayout plan_eager_layout(const ir::OpDef& def, std::span<const ir::TensorType> inputs,
                              const std::vector<bool>& channels_last, const ir::Attrs& attrs,
                              std::span<const ir::TensorType> outputs, bool keep_channels_last,
                              bool deterministic);

// `t` in NCHW order: itself, or its copy (queued once, kept with the tensor).
Tensor plain_tensor(const Tensor& t, std::source_location where = std::source_location::current());
// `t` (plain, rank 4) copied into channels-last order, as a convolution about to reorder it would.
Tensor channels_last_tensor(const Tensor& t,
                            std::source_location where = std::source_location::current());

}  // namespace mf::engine
