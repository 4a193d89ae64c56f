#include "runtime/kernels/strided.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/error.h"
#include "runtime/kernels/transpose_tiles.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

// Elements per tile handed to a TileFn: small enough that the gathered operands of a ternary op
// stay in L1/L2, large enough to amortise the call and let Eigen vectorise.
constexpr int64_t kTile = 2048;
// Elements per parallel chunk: about 100 microseconds of simple math per chunk on one core.
constexpr int64_t kChunk = 16 * kTile;

template <typename E>
void gather_typed(const E* src, const ir::Shape& shape, const std::vector<int64_t>& strides,
                  int64_t start, int64_t n, E* dst) {
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    std::fill(dst, dst + n, src[0]);
    return;
  }
  std::vector<int64_t> coord(rank);
  int64_t offset = 0;
  int64_t rest = start;
  for (int d = rank - 1; d >= 0; --d) {
    coord[d] = rest % shape[d];
    rest /= shape[d];
    offset += coord[d] * strides[d];
  }
  const int last = rank - 1;
  const int64_t row = shape[last];
  const int64_t step = strides[last];
  while (n > 0) {
    const int64_t run = std::min(n, row - coord[last]);
    if (step == 1) {
      std::memcpy(dst, src + offset, run * sizeof(E));
    } else if (step == 0) {
      std::fill(dst, dst + run, src[offset]);
    } else {
      for (int64_t k = 0; k < run; ++k) dst[k] = src[offset + k * step];
    }
    dst += run;
    n -= run;
    coord[last] += run;
    offset += run * step;
    if (coord[last] < row || n == 0) continue;
    // Carry into the outer axes.
    offset -= row * step;
    coord[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++coord[d];
      offset += strides[d];
      if (coord[d] < shape[d]) break;
      offset -= shape[d] * strides[d];
      coord[d] = 0;
    }
  }
}

bool is_contiguous(const StridedView& view) {
  return view.strides == ir::contiguous_strides(view.shape);
}

// A collapsed view [outer..., rows, cols] read with stride 1 along rows and ld > 1 along cols is a
// stack of matrices stored column by column (every NCHW <-> NHWC transpose is one): copied by
// transpose_rows in strips of 16 rows, not gathered row by row. False when the view is not one.
bool copy_transposed(const StridedView& view, size_t elem_size, char* out) {
  const int rank = static_cast<int>(view.shape.size());
  if (rank < 2 || view.strides[rank - 2] != 1 || view.strides[rank - 1] <= 1) return false;
  const int64_t rows = view.shape[rank - 2];
  const int64_t cols = view.shape[rank - 1];
  const int64_t ld = view.strides[rank - 1];
  int64_t matrices = 1;
  for (int d = 0; d < rank - 2; ++d) matrices *= view.shape[d];
  constexpr int64_t kStrip = 16;
  const int64_t strips = (rows + kStrip - 1) / kStrip;
  const char* src = static_cast<const char*>(view.data);
  parallel_for(matrices * strips, std::max<int64_t>(1, kChunk / (kStrip * cols)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t matrix = item / strips;
                   const int64_t row = item % strips * kStrip;
                   int64_t offset = 0;
                   for (int64_t d = rank - 3, rest = matrix; d >= 0; --d) {
                     offset += rest % view.shape[d] * view.strides[d];
                     rest /= view.shape[d];
                   }
                   transpose_rows(src + offset * static_cast<int64_t>(elem_size), ld, row,
                                  std::min(rows, row + kStrip), cols, elem_size,
                                  out + matrix * rows * cols * static_cast<int64_t>(elem_size));
                 }
               });
  return true;
}

}  // namespace

std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out) {
  const std::vector<int64_t> own = ir::contiguous_strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[lead + i] = in[i] == 1 ? 0 : own[i];
  }
  return strides;
}

void collapse_axes(std::vector<StridedView*> views) {
  if (views.empty()) return;
  ir::Shape shape;
  std::vector<std::vector<int64_t>> strides(views.size());
  const ir::Shape& original = views[0]->shape;
  for (size_t d = 0; d < original.size(); ++d) {
    if (original[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t v = 0; merge && v < views.size(); ++v) {
      merge = strides[v].back() == views[v]->strides[d] * original[d];
    }
    if (merge) {
      shape.back() *= original[d];
      for (size_t v = 0; v < views.size(); ++v) strides[v].back() = views[v]->strides[d];
    } else {
      shape.push_back(original[d]);
      for (size_t v = 0; v < views.size(); ++v) strides[v].push_back(views[v]->strides[d]);
    }
  }
  for (size_t v = 0; v < views.size(); ++v) {
    views[v]->shape = shape;
    views[v]->strides = std::move(strides[v]);
  }
}

void gather(const StridedView& view, size_t elem_size, int64_t start, int64_t n, void* dst) {
  switch (elem_size) {
    case 1:
      return gather_typed(static_cast<const uint8_t*>(view.data), view.shape, view.strides, start,
                          n, static_cast<uint8_t*>(dst));
    case 4:
      return gather_typed(static_cast<const uint32_t*>(view.data), view.shape, view.strides, start,
                          n, static_cast<uint32_t*>(dst));
    case 8:
      return gather_typed(static_cast<const uint64_t*>(view.data), view.shape, view.strides, start,
                          n, static_cast<uint64_t*>(dst));
  }
  MF_FAIL(Internal, "gather: unsupported element size ", elem_size);
}

void strided_copy(StridedView view, size_t elem_size, void* dst) {
  const int64_t n = ir::num_elements(view.shape);
  if (n == 0) return;  // an empty view: nothing to copy (its strides may be anything)
  collapse_axes({&view});
  if (is_contiguous(view)) {
    std::memcpy(dst, view.data, n * elem_size);
    return;
  }
  char* out = static_cast<char*>(dst);
  if (copy_transposed(view, elem_size, out)) return;
  parallel_for(n, kChunk, [&](int64_t begin, int64_t end) {
    gather(view, elem_size, begin, end - begin, out + begin * elem_size);
  });
}

void run_elementwise(const ir::KernelContext& ctx, ir::TileFn tile) {
  MF_CHECK(tile != nullptr, Internal, ctx.op_name, ": no elementwise math for dtype ",
           ir::dtype_name(ctx.inputs.empty() ? ctx.outputs[0].type.dtype
                                             : ctx.inputs.back().type.dtype));
  const ir::TensorView& output = ctx.outputs[0];
  const ir::Shape& out_shape = output.type.shape;
  const int64_t n = ir::num_elements(out_shape);
  if (n == 0) return;
  const size_t out_elem = ir::dtype_size(output.type.dtype);
  char* out = static_cast<char*>(output.data);
  const size_t arity = ctx.inputs.size();

  // Fixed arrays, not vectors: a PYNATIVE op on a small tensor would otherwise spend more in the
  // allocator than in its math. The tile math takes at most 32 operands (its `scalars` bit mask).
  constexpr size_t kMaxArity = 32;
  MF_CHECK(arity <= kMaxArity, Internal, ctx.op_name, ": ", arity,
           " operands, the tile math takes ", kMaxArity);
  enum class Kind { kFull, kScalar, kGathered };
  std::array<Kind, kMaxArity> kinds;
  std::array<size_t, kMaxArity> elem;
  bool any_gathered = false;
  for (size_t i = 0; i < arity; ++i) {
    const ir::TensorView& in = ctx.inputs[i];
    elem[i] = ir::dtype_size(in.type.dtype);
    if (in.type.shape == out_shape || (in.size() == n && n == 1)) {
      kinds[i] = Kind::kFull;
    } else if (in.size() == 1) {
      kinds[i] = Kind::kScalar;
    } else {
      kinds[i] = Kind::kGathered;
      any_gathered = true;
    }
  }

  // Scalar operands go to the tile math as one element (bit i of `scalars`), never copied.
  uint32_t scalars = 0;
  for (size_t i = 0; i < arity; ++i) {
    if (kinds[i] == Kind::kScalar) scalars |= 1u << i;
  }
  if (!any_gathered) {
    parallel_for(n, kChunk, [&](int64_t begin, int64_t end) {
      std::array<const void*, kMaxArity> ptrs;
      for (size_t i = 0; i < arity; ++i) {
        ptrs[i] = static_cast<const char*>(ctx.inputs[i].data) +
                  (kinds[i] == Kind::kScalar ? 0 : begin * elem[i]);
      }
      tile(ptrs.data(), scalars, out + begin * out_elem, end - begin);
    });
    return;
  }

  std::vector<StridedView> views(arity);
  for (size_t i = 0; i < arity; ++i) {
    if (kinds[i] != Kind::kGathered) continue;
    views[i] = StridedView{ctx.inputs[i].data, out_shape,
                           broadcast_strides(ctx.inputs[i].type.shape, out_shape)};
  }
  {
    std::vector<StridedView*> gathered;
    for (size_t i = 0; i < arity; ++i) {
      if (kinds[i] == Kind::kGathered) gathered.push_back(&views[i]);
    }
    collapse_axes(gathered);
  }
  parallel_for(n, kChunk, [&](int64_t begin, int64_t end) {
    // Per-chunk buffers: chunks run concurrently, and a chunk of kChunk elements amortises them.
    std::vector<std::vector<char>> buffers(arity);
    std::vector<const void*> ptrs(arity);
    for (size_t i = 0; i < arity; ++i) {
      if (kinds[i] == Kind::kGathered) buffers[i].resize(kTile * elem[i]);
      ptrs[i] = kinds[i] == Kind::kScalar ? ctx.inputs[i].data : buffers[i].data();
    }
    for (int64_t start = begin; start < end; start += kTile) {
      const int64_t len = std::min(kTile, end - start);
      for (size_t i = 0; i < arity; ++i) {
        if (kinds[i] == Kind::kFull) {
          ptrs[i] = static_cast<const char*>(ctx.inputs[i].data) + start * elem[i];
        } else if (kinds[i] == Kind::kGathered) {
          gather(views[i], elem[i], start, len, buffers[i].data());
        }
      }
      tile(ptrs.data(), scalars, out + start * out_elem, len);
    }
  });
}

}  // namespace mf::runtime::ops
