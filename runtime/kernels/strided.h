#pragma once
// Byte-level strided copies: broadcasting gathers for the elementwise kernel and the data movement
// of shape ops (transpose, slice, broadcast_to). Element size is all they know, so they serve every
// dtype without instantiating Eigen once per type.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ir/op_def.h"
#include "ir/shape.h"

namespace mf::runtime::ops {

// Element strides of a tensor of shape `in` broadcast to `out` (numpy rule, aligned at the trailing
// axis): the tensor's own strides, 0 where it is broadcast. The result has out's rank.
std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out);

// A strided view over `shape` (the iteration space, row-major) reading src[sum(coord * strides)].
struct StridedView {
  const void* data = nullptr;
  ir::Shape shape;
  std::vector<int64_t> strides;  // in elements, may be 0 (broadcast) or larger than contiguous
};

// Merges adjacent axes that every view walks contiguously relative to each other and drops size-1
// axes, so loops run over as few and as long rows as possible. All views share one shape.
void collapse_axes(std::vector<StridedView*> views);

// Copies elements [start, start + n) of the view (in row-major order of view.shape) to dst.
void gather(const StridedView& view, size_t elem_size, int64_t start, int64_t n, void* dst);

// Copies the whole view to a contiguous dst, in parallel over fixed chunks.
void strided_copy(StridedView view, size_t elem_size, void* dst);

// The plain kernel of an elementwise op: broadcasts ctx.inputs to ctx.outputs[0]'s shape and calls
// `tile` over contiguous tiles (directly on the buffers where an input already has the output's
// shape, through small gathered buffers otherwise). Parallel over fixed chunks of the output.
void run_elementwise(const ir::KernelContext& ctx, ir::TileFn tile);

}  // namespace mf::runtime::ops
