#pragma once
// What the float32 conv2d kernel does with an NCHW input, for callers that choose where tensors
// live between ops (engine/eager_layout.cc): whether it would reorder x into channels-last order
// anyway, to run one of oneDNN's direct kernels.

#include <span>

#include "ir/attribute.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {

// True when conv2d over NCHW `in` (x, weight[, bias]) with `attrs` (defaults filled in) would run
// oneDNN's channels-last primitive and reorder x in and y out around it; false for the plain
// im2col + sgemm path (1x1 windows, small output planes) and for the NCHW depthwise kernel.
bool conv2d_reorders_to_channels_last(std::span<const ir::TensorType> in, const ir::Attrs& attrs,
                                      bool deterministic);

}  // namespace mf::runtime::ops
