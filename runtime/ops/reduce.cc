// reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod {axes, keep_dims}. Empty axes reduce
// everything.
//
// With `deterministic` every reduction runs in a fixed order that depends only on the shapes (fixed
// blocks combined in index order), so results are the same for any thread count. Without it, a long
// reduction over an axis with few, short columns (x[n, 8] summed over n: one task in the fixed
// order) is split into one chunk per intra-op thread and the chunks' partial sums added: faster,
// but the bits follow the thread count (the default, deterministic=OFF).
// Reduced axes that are not one contiguous block are first moved last by a strided copy.
//
// Products follow the same blocking as sums (row_math.h's lanes, tree and segments, written out
// here as prod_row_fixed). Integer products wrap around (two's complement): they are multiplied as
// unsigned, so an overflow is defined and the order of the factors cannot change the bits.

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/row_math.h"
#include "runtime/kernels/strided.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

enum class Reduction { kSum, kMean, kMax, kMin, kProd };

// Elements per parallel block of a long row: reduce_row_fixed's segments, so a long row reduced
// block by block in parallel sums in the same order as one reduce_row over it.
constexpr int64_t kBlock = kReduceSegment;

// The reduced axes, normalized, sorted and checked for duplicates; empty attr = all axes.
std::vector<bool> reduced_axes(std::string_view op, const Shape& shape, const Attrs& attrs) {
  const std::vector<int64_t>& axes = ir::attr_ints(attrs, "axes", op);
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    const int64_t a = ir::normalize_axis(axis, rank, op);
    MF_CHECK(!reduced[a], InvalidArgument, op, ": axis ", axis, " appears twice in axes ",
             ints_to_string(axes));
    reduced[a] = true;
  }
  return reduced;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduced, bool keep_dims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(shape[d]);
    } else if (keep_dims) {
      out.push_back(1);
    }
  }
  return out;
}

ir::InferFn infer_reduce(std::string op, std::initializer_list<DType> supported) {
  std::vector<DType> types(supported);
  return [op = std::move(op), types](std::span<const TensorType> in, const Attrs& attrs) {
    bool ok = std::find(types.begin(), types.end(), in[0].dtype) != types.end();
    if (!ok) {
      std::string names;
      for (DType d : types) names += (names.empty() ? "" : ", ") + std::string(ir::dtype_name(d));
      MF_FAIL(InvalidArgument, op, " does not support ", ir::dtype_name(in[0].dtype),
              "; supported: ", names);
    }
    const std::vector<bool> reduced = reduced_axes(op, in[0].shape, attrs);
    const bool keep = ir::attr_bool(attrs, "keep_dims", op);
    // A sum or a product of nothing is its identity (0, 1); a mean, maximum or minimum of nothing
    // is undefined.
    const bool has_identity = op == "reduce_sum" || op == "reduce_prod";
    for (size_t d = 0; d < reduced.size(); ++d) {
      MF_CHECK(!reduced[d] || in[0].shape[d] > 0 || has_identity, InvalidArgument, op,
               ": cannot reduce the empty axis ", d, " of ", ir::shape_to_string(in[0].shape));
    }
    return std::vector<TensorType>{{in[0].dtype, reduced_shape(in[0].shape, reduced, keep)}};
  };
}

// a * b; integers as unsigned, so an overflow wraps instead of being undefined.
template <typename T>
T times(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <Reduction R, typename T>
T combine(T a, T b) {
  if constexpr (R == Reduction::kMax) {
    return std::max(a, b);
  } else if constexpr (R == Reduction::kMin) {
    return std::min(a, b);
  } else if constexpr (R == Reduction::kProd) {
    return times(a, b);
  } else {
    return a + b;
  }
}

// The product of 1 <= n <= kReduceSegment elements in reduce_segment_fixed's order: kReduceLanes
// lanes multiply fixed blocks from the first element (unaligned loads), the lanes combine in a
// fixed pairwise tree, the tail multiplies in order. Integers wrap, so their order is immaterial.
template <typename T>
T prod_segment_fixed(const T* x, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    T result = T(1);
    for (int64_t i = 0; i < n; ++i) result = times(result, x[i]);
    return result;
  } else {
    using Lanes = Eigen::Array<T, kReduceLanes, 1>;
    int64_t i = 0;
    T result = T(1);
    if (n >= kReduceLanes) {
      Lanes acc = Eigen::Map<const Lanes>(x);
      for (i = kReduceLanes; i + kReduceLanes <= n; i += kReduceLanes) {
        acc *= Eigen::Map<const Lanes>(x + i);
      }
      for (int64_t width = kReduceLanes / 2; width >= 1; width /= 2) {
        for (int64_t l = 0; l < width; ++l) acc[l] *= acc[l + width];
      }
      result = acc[0];
    }
    for (; i < n; ++i) result *= x[i];
    return result;
  }
}

// A row's product (of none, 1): segments of kReduceSegment combined left to right, as
// reduce_row_fixed combines a sum's, so the kernel's parallel blocks of one long row agree with it.
template <typename T>
T prod_row_fixed(const T* x, int64_t n) {
  if (n == 0) return T(1);
  T result = prod_segment_fixed(x, std::min(n, kReduceSegment));
  for (int64_t s = kReduceSegment; s < n; s += kReduceSegment) {
    result = times(result, prod_segment_fixed(x + s, std::min(kReduceSegment, n - s)));
  }
  return result;
}

template <Reduction R, typename T>
T reduce_row(const T* x, int64_t n) {
  if constexpr (R == Reduction::kProd) {
    return prod_row_fixed(x, n);
  } else {
    constexpr RowReduction kRow = R == Reduction::kMax   ? RowReduction::kMax
                                  : R == Reduction::kMin ? RowReduction::kMin
                                                         : RowReduction::kSum;
    return reduce_row_fixed<kRow>(x, n);
  }
}

// acc = combine(acc, part) element by element.
template <Reduction R, typename T>
void combine_into(Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>& acc,
                  const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>& part) {
  if constexpr (R == Reduction::kMax) {
    acc = acc.max(part);
  } else if constexpr (R == Reduction::kMin) {
    acc = acc.min(part);
  } else if constexpr (R == Reduction::kProd && std::is_integral_v<T>) {
    for (Eigen::Index i = 0; i < acc.size(); ++i) acc[i] = times(acc[i], part[i]);
  } else if constexpr (R == Reduction::kProd) {
    acc *= part;
  } else {
    acc += part;
  }
}

template <Reduction R, typename T>
void accumulate_rows(Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>& acc, const T* base,
                     int64_t first, int64_t last, int64_t inner, int64_t width) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  for (int64_t r = first; r < last; ++r) {
    const Eigen::Map<const Array> row(base + r * inner, width);
    combine_into<R, T>(acc, row);
  }
}

// deterministic=OFF: y[o, i] = the chunks' partial results over r, one chunk per thread, combined
// in chunk order. The chunk bounds depend on the thread count, so the bits do too.
template <Reduction R, typename T>
void reduce_columns_split(const T* x, T* y, int64_t outer, int64_t count, int64_t inner,
                          int64_t chunks) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const int64_t per = (count + chunks - 1) / chunks;
  std::vector<T> partial(static_cast<size_t>(chunks * outer * inner));
  parallel_for(chunks * outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item % chunks;
      const int64_t o = item / chunks;
      const int64_t first = chunk * per;
      const int64_t last = std::min(count, first + per);
      if (first >= last) continue;  // more chunks than rows: never combined
      // Accumulated in a buffer of this task's own: chunks side by side in `partial` would share
      // cache lines while every row is added.
      std::vector<T> local(static_cast<size_t>(inner));
      Eigen::Map<Array> acc(local.data(), inner);
      const T* base = x + o * count * inner;
      acc = Eigen::Map<const Array>(base + first * inner, inner);
      accumulate_rows<R, T>(acc, base, first + 1, last, inner, inner);
      std::copy(local.begin(), local.end(), partial.begin() + (chunk * outer + o) * inner);
    }
  });
  Eigen::Map<Array> out(y, outer * inner);
  out = Eigen::Map<const Array>(partial.data(), outer * inner);
  for (int64_t chunk = 1; chunk < chunks; ++chunk) {
    const Eigen::Map<const Array> part(partial.data() + chunk * outer * inner, outer * inner);
    if (chunk * per >= count) break;
    combine_into<R, T>(out, part);
  }
}

// y[o, i] = reduce over r of x[o, r, i].
template <Reduction R, typename T>
void reduce_3d(const T* x, T* y, int64_t outer, int64_t count, int64_t inner, bool deterministic) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const int64_t threads = intra_op_threads();
  if (!deterministic && inner > 1 && inner <= 4096 && outer < threads && count >= 4 * threads &&
      count * inner >= kBlock) {
    reduce_columns_split<R, T>(x, y, outer, count, inner, threads);
    return;
  }
  if (inner == 1 && outer == 1 && count > kBlock) {
    // One long row: fixed blocks reduced in parallel, then combined in block order.
    const int64_t blocks = (count + kBlock - 1) / kBlock;
    std::vector<T> partial(blocks);
    parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        partial[b] = reduce_row<R>(x + b * kBlock, std::min(kBlock, count - b * kBlock));
      }
    });
    T acc = partial[0];
    for (int64_t b = 1; b < blocks; ++b) acc = combine<R>(acc, partial[b]);
    y[0] = acc;
  } else if (inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kBlock / std::max<int64_t>(1, count));
    parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) y[o] = reduce_row<R>(x + o * count, count);
    });
  } else {
    // Accumulate whole rows of `inner` in r order (vectorised across inner), in column blocks.
    const int64_t col_blocks = (inner + 4095) / 4096;
    parallel_for(outer * col_blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / col_blocks;
        const int64_t c0 = (item % col_blocks) * 4096;
        const int64_t width = std::min<int64_t>(4096, inner - c0);
        Eigen::Map<Array> acc(y + o * inner + c0, width);
        const T* base = x + o * count * inner + c0;
        acc = Eigen::Map<const Array>(base, width);
        accumulate_rows<R, T>(acc, base, 1, count, inner, width);
      }
    });
  }
}

template <Reduction R>
void reduce_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& in = ctx.inputs[0];
  const Shape& shape = in.type.shape;
  const std::vector<bool> reduced = reduced_axes(ctx.op_name, shape, ctx.attrs);
  const size_t elem = ir::dtype_size(in.type.dtype);

  // Segments of axes (size-1 axes dropped) alternating kept / reduced.
  std::vector<std::pair<bool, int64_t>> segments;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!segments.empty() && segments.back().first == reduced[d]) {
      segments.back().second *= shape[d];
    } else {
      segments.push_back({reduced[d], shape[d]});
    }
  }
  int64_t outer = 1, count = 1, inner = 1;
  const void* data = in.data;
  std::vector<char> moved;
  int reduced_segments = 0;
  for (const auto& s : segments) reduced_segments += s.first ? 1 : 0;
  // Two reduced runs, the second innermost (a bias gradient: NCHW summed over N, H and W): each
  // row of the inner run is reduced first, in place of a strided copy of the whole tensor (4x
  // faster on 64 x 6 x 28 x 28), then the outer run over those rows' results.
  int64_t tail = 1;
  if (reduced_segments == 2 && segments.back().first) {
    tail = segments.back().second;
    segments.pop_back();
    reduced_segments = 1;
  }
  if (reduced_segments <= 1) {
    bool seen = false;
    for (const auto& [is_reduced, size] : segments) {
      if (is_reduced) {
        count = size;
        seen = true;
      } else {
        (seen ? inner : outer) *= size;
      }
    }
  } else {
    // Move the reduced axes last: the view walks kept axes then reduced axes of the input.
    StridedView view{in.data, {}, {}};
    const std::vector<int64_t> strides = ir::contiguous_strides(shape);
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t d = 0; d < shape.size(); ++d) {
        if (reduced[d] != (pass == 1)) continue;
        view.shape.push_back(shape[d]);
        view.strides.push_back(strides[d]);
        (pass == 1 ? count : outer) *= shape[d];
      }
    }
    moved.resize(in.size() * elem);
    strided_copy(view, elem, moved.data());
    data = moved.data();
  }
  if (ctx.outputs[0].size() == 0) return;
  ir::visit_dtype(in.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> ||
                  (R == Reduction::kMean && !std::is_floating_point_v<T>)) {
      MF_FAIL(Internal, ctx.op_name, ": no kernel for ", ir::dtype_name(in.type.dtype));
    } else {
      T* y = ctx.outputs[0].as<T>();
      if (count == 0 || tail == 0) {  // the identity: nothing was reduced
        std::fill(y, y + ctx.outputs[0].size(), T(R == Reduction::kProd ? 1 : 0));
        return;
      }
      constexpr Reduction kCore = R == Reduction::kMean ? Reduction::kSum : R;
      const T* x = static_cast<const T*>(data);
      std::vector<T> rows;
      if (tail > 1) {
        rows.resize(static_cast<size_t>(outer * count * inner));
        reduce_3d<kCore, T>(x, rows.data(), outer * count * inner, tail, 1, ctx.deterministic);
        x = rows.data();
      }
      reduce_3d<kCore, T>(x, y, outer, count, inner, ctx.deterministic);
      if constexpr (R == Reduction::kMean) {
        const int64_t n = ctx.outputs[0].size();
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(y, n) /= static_cast<T>(count * tail);
      }
    }
  });
}

// One contiguous row through the same reduce_row the kernel uses (the fused-kernel evaluator's
// reduce tails): same code, same address alignment, same order of additions.
template <Reduction R, typename T>
void reduce_one_row(const void* row, int64_t n, void* out) {
  constexpr Reduction kCore = R == Reduction::kMean ? Reduction::kSum : R;
  T value = reduce_row<kCore, T>(static_cast<const T*>(row), n);
  if constexpr (R == Reduction::kMean) value /= static_cast<T>(n);
  *static_cast<T*>(out) = value;
}

template <Reduction R, typename... Ts>
ir::ReduceMath reduce_math() {
  ir::ReduceMath math;
  ((math.by_dtype[static_cast<size_t>(ir::dtype_of<Ts>())] = &reduce_one_row<R, Ts>), ...);
  math.single_row_limit = kBlock;
  return math;
}

template <Reduction R>
std::vector<RefTensor> reduce_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  const std::vector<bool> reduced = reduced_axes("reference", shape, attrs);
  const bool keep = std::get<bool>(attrs.at("keep_dims"));
  const Shape kept_shape = reduced_shape(shape, reduced, true);
  const double init = R == Reduction::kMax    ? -INFINITY
                      : R == Reduction::kMin  ? INFINITY
                      : R == Reduction::kProd ? 1.0
                                              : 0.0;
  RefTensor acc = ref_tensor(kept_shape, init);
  std::vector<int64_t> counts(acc.values.size(), 0);
  for (int64_t i = 0; i < static_cast<int64_t>(in[0].values.size()); ++i) {
    std::vector<int64_t> coord = ref_unravel(i, shape);
    for (size_t d = 0; d < coord.size(); ++d) {
      if (reduced[d]) coord[d] = 0;
    }
    const int64_t o = ref_ravel(coord, kept_shape);
    const double v = in[0].values[i];
    double& a = acc.values[o];
    a = R == Reduction::kMax    ? std::max(a, v)
        : R == Reduction::kMin  ? std::min(a, v)
        : R == Reduction::kProd ? a * v
                                : a + v;
    ++counts[o];
  }
  if (R == Reduction::kMean) {
    for (size_t o = 0; o < acc.values.size(); ++o) acc.values[o] /= counts[o];
  }
  acc.shape = reduced_shape(shape, reduced, keep);
  return {acc};
}

ir::Attrs reduce_attrs(std::vector<int64_t> axes, bool keep_dims) {
  return {{"axes", axes}, {"keep_dims", keep_dims}};
}

std::vector<ir::OpSample> reduce_samples() {
  return {
      sample({f32({3, 5})}, reduce_attrs({}, false)),
      sample({f32({3, 5})}, reduce_attrs({1}, false)),
      sample({f32({3, 5})}, reduce_attrs({0}, true)),
      sample({f32({2, 3, 4})}, reduce_attrs({-1}, true)),
      sample({f32({2, 3, 4})}, reduce_attrs({0, 2}, false)),           // non-contiguous axes
      sample({f32({3, 4, 2, 5, 6})}, reduce_attrs({1, 3, 4}, true)),   // kept, 2 runs, inner last
      sample({f32({2, 3, 4, 5, 6})}, reduce_attrs({0, 2, 4}, false)),  // three runs
      sample({f32({2, 3, 4, 5})}, reduce_attrs({1, 2}, true)),
      sample({f32({7})}, reduce_attrs({0}, false)),
      sample({f32({})}, reduce_attrs({}, false)),
      sample({f32({100000})}, reduce_attrs({}, false)),  // parallel blocks of one long row
      sample({f32({3, 1, 5000})}, reduce_attrs({0}, false)),
  };
}

// Products grow fast, and an integer product must stay exact in int32 for the reference to hold
// (integers are drawn from [5 low, 5 high]): up to 8 factors of |x| <= 10, 12 of |x| <= 5, 15 of
// |x| <= 4, and the long row's factors only -1, 0 and 1.
std::vector<ir::OpSample> prod_samples() {
  return {
      sample({f32({3, 5})}, reduce_attrs({}, false), -0.9, 0.9),
      sample({f32({3, 5})}, reduce_attrs({1}, false)),
      sample({f32({3, 5})}, reduce_attrs({0}, true)),
      sample({f32({2, 3, 4})}, reduce_attrs({-1}, true)),
      sample({f32({2, 3, 4})}, reduce_attrs({0, 2}, false)),  // non-contiguous axes
      sample({f32({2, 3, 4, 5})}, reduce_attrs({1, 2}, true), -1.1, 1.1),
      sample({f32({7})}, reduce_attrs({0}, false)),
      sample({f32({})}, reduce_attrs({}, false)),
      sample({f32({2, 100})}, reduce_attrs({1}, false), -0.29, 0.29),  // lanes, tree and tail
      sample({f32({100000})}, reduce_attrs({}, false), -0.29, 0.29),   // parallel blocks of one row
      sample({f32({3, 1, 5000})}, reduce_attrs({0}, false)),
  };
}

// Backward rules. A reduced value's gradient goes back to the elements it came from: dout with
// the reduced axes restored as size 1 (keep_dims), then broadcast over them.

// dout in the keep_dims shape of the reduction, so it broadcasts against the input.
ir::GradValue dout_kept(ir::GradBuilder& b, std::string_view op) {
  const std::vector<bool> reduced = reduced_axes(op, b.input_type(0).shape, b.attrs());
  return reshape_to(b, b.dout(0), reduced_shape(b.input_type(0).shape, reduced, true));
}

// The number of elements each reduced value summarizes.
int64_t reduced_count(ir::GradBuilder& b, std::string_view op) {
  const Shape& shape = b.input_type(0).shape;
  const std::vector<bool> reduced = reduced_axes(op, shape, b.attrs());
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) count *= reduced[d] ? shape[d] : 1;
  return count;
}

void sum_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  b.set_grad(0, broadcast_to(b, dout_kept(b, "reduce_sum"), b.input_type(0).shape));
}

void mean_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  // Scaled before the broadcast, on the smaller tensor. An empty reduction has no input element
  // to give a gradient to: its scale is never used.
  const int64_t count = reduced_count(b, "reduce_mean");
  const ir::GradValue scaled = b.op(
      "mul", {dout_kept(b, "reduce_mean"), scalar_like(b, count > 0 ? 1.0 / double(count) : 0.0)});
  b.set_grad(0, broadcast_to(b, scaled, b.input_type(0).shape));
}

// reduce_max and reduce_min: dout goes to the elements equal to the result, split evenly among
// them on a tie (TensorFlow's and MindSpore's rule), so the ties' gradients sum to dout.
template <Reduction R>
void extreme_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const std::string_view op = R == Reduction::kMax ? "reduce_max" : "reduce_min";
  const std::vector<bool> reduced = reduced_axes(op, b.input_type(0).shape, b.attrs());
  const Shape kept = reduced_shape(b.input_type(0).shape, reduced, true);
  std::vector<int64_t> axes;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
  }
  const DType dtype = b.input_type(0).dtype;
  const ir::GradValue hit = b.op(
      "cast", {b.op("equal", {b.input(0), reshape_to(b, b.output(0), kept)})}, {{"dtype", dtype}});
  const ir::GradValue ties = reshape_to(b, sum_over(b, hit, axes, true), kept);
  const ir::GradValue share = b.op("div", {reshape_to(b, b.dout(0), kept), ties});
  b.set_grad(0, b.op("mul", {hit, share}));
}

// reduce_prod: each element's gradient is dout times the product of the others, computed without
// dividing by zero. With p the product of the nonzero elements and z the count of zeros: p / x
// where z = 0; p at the zero where z = 1, 0 at the others; 0 everywhere where z > 1.
void prod_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const TensorType& type = b.input_type(0);
  const std::vector<bool> reduced = reduced_axes("reduce_prod", type.shape, b.attrs());
  const Shape kept = reduced_shape(type.shape, reduced, true);
  std::vector<int64_t> axes;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
  }
  // A scalar reduces over no axis: the product of one element.
  if (axes.empty()) return b.set_grad(0, reshape_to(b, b.dout(0), type.shape));
  const ir::Attrs over = {{"axes", axes}, {"keep_dims", true}};
  const ir::GradValue x = b.input(0), zero = scalar_like(b, 0), one = scalar_like(b, 1);
  const ir::GradValue is_zero = b.op("equal", {x, zero});
  const ir::GradValue nonzero = b.op("select", {is_zero, one, x});
  const ir::GradValue p = b.op("reduce_prod", {nonzero}, over);
  const ir::GradValue zeros =
      b.op("reduce_sum", {b.op("cast", {is_zero}, {{"dtype", type.dtype}})}, over);
  const ir::GradValue lone_zero = b.op("logical_and", {b.op("equal", {zeros, one}), is_zero});
  const ir::GradValue local =
      b.op("select", {b.op("equal", {zeros, zero}), b.op("div", {p, nonzero}),
                      b.op("select", {lone_zero, p, zero})});
  b.set_grad(0, b.op("mul", {reshape_to(b, b.dout(0), kept), local}));
}

ir::OpBuilder declare(std::string name, std::initializer_list<DType> types, std::string doc,
                      ir::KernelFn kernel, ir::ReferenceFn reference, double tolerance,
                      ir::ReduceMath math) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(1)
      .attr("axes", ir::AttrKind::kInts, std::vector<int64_t>{},
            "axes to reduce (negative counts from the end); [] = all")
      .attr("keep_dims", ir::AttrKind::kBool, false, "keep reduced axes as size 1")
      .traits(Trait::kReduce | Trait::kPure)
      .infer(infer_reduce(name, types))
      .kernel(std::move(kernel))
      .reference(std::move(reference))
      .samples(reduce_samples())
      .tolerance(tolerance)
      .reduce(math)
      .doc(std::move(doc));
  return b;
}

const ir::OpRegistration kReduceSum =
    declare("reduce_sum", kNumericTypes, "sum over axes", reduce_kernel<Reduction::kSum>,
            reduce_reference<Reduction::kSum>, 1e-4,
            reduce_math<Reduction::kSum, float, double, int32_t, int64_t>())
        .backward({}, sum_backward);
const ir::OpRegistration kReduceMean =
    declare("reduce_mean", kFloatTypes, "mean over axes", reduce_kernel<Reduction::kMean>,
            reduce_reference<Reduction::kMean>, 1e-5,
            reduce_math<Reduction::kMean, float, double>())
        .backward({}, mean_backward);
const ir::OpRegistration kReduceMax =
    declare("reduce_max", kNumericTypes, "maximum over axes", reduce_kernel<Reduction::kMax>,
            reduce_reference<Reduction::kMax>, 1e-6,
            reduce_math<Reduction::kMax, float, double, int32_t, int64_t>())
        .backward({.inputs = 1, .outputs = 1}, extreme_backward<Reduction::kMax>);
const ir::OpRegistration kReduceMin =
    declare("reduce_min", kNumericTypes, "minimum over axes", reduce_kernel<Reduction::kMin>,
            reduce_reference<Reduction::kMin>, 1e-6,
            reduce_math<Reduction::kMin, float, double, int32_t, int64_t>())
        .backward({.inputs = 1, .outputs = 1}, extreme_backward<Reduction::kMin>);
const ir::OpRegistration kReduceProd =
    declare("reduce_prod", kNumericTypes,
            "product over axes (of none: 1; integers wrap around on overflow)",
            reduce_kernel<Reduction::kProd>, reduce_reference<Reduction::kProd>, 1e-5,
            reduce_math<Reduction::kProd, float, double, int32_t, int64_t>())
        .samples(prod_samples())
        .backward({.inputs = 1}, prod_backward);

}  // namespace
}  // namespace mf::runtime::ops
