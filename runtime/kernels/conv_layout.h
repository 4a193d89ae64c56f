#pragma once
// What the float32 conv2d kernel does with its operands, for the callers that choose where tensors
// live between ops (engine/eager/eager_layout.cc) and that prepare an op-by-op run
// (engine/eager/ir_runner.cc): whether it would reorder x into channels-last order anyway, and its
// weights' reorder done ahead.

#include <span>

#include "ir/attribute.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {

// True when conv2d over NCHW `in` (x, weight[, bias]) with `attrs` (defaults filled in) would run
// oneDNN's channels-last primitive and reorder x in and y out around it; false for the plain
// im2col + sgemm path (1x1 windows, small output planes) and for the NCHW depthwise kernel.
bool conv2d_reorders_to_channels_last(std::span<const ir::TensorType> in, const ir::Attrs& attrs,
                                      bool deterministic);

// True when float32 conv2d over `in` with `attrs` runs the packed-weights kernel
// (runtime/kernels/packed_conv.h) rather than oneDNN's.
bool conv2d_runs_packed(std::span<const ir::TensorType> in, const ir::Attrs& attrs);

// True when float32 conv2d over `in` with `attrs` runs oneDNN's primitive on its own blocked
// activation layout, x reordered in and y out (a heavy convolution on a CPU whose channels-last
// kernel is not brgconv); false on AVX-512 and for thin convolutions.
bool conv2d_runs_blocked_activations(std::span<const ir::TensorType> in, const ir::Attrs& attrs);

// Whether oneDNN's channels-last convolution kernel on this CPU is brgconv (AVX-512).
bool onednn_channels_last_conv_is_brgconv();

// Reorders `weights` (conv2d's input 1, a tensor whose content identity is set) into the layout
// the float32 kernel for `in` and `attrs` at `threads` will want, and keeps them where its calls
// look (the reordered-weights cache), so the first call does not pay the reorder. A no-op where
// the kernel reads the weights as they are.
void reorder_conv2d_weights_ahead(std::span<const ir::TensorType> in, const ir::Attrs& attrs,
                                  const ir::TensorView& weights, int threads, bool deterministic);

}  // namespace mf::runtime::ops
