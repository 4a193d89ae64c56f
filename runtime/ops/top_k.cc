// Ops that rank elements along one axis: top_k {k, axis, largest, sorted} gives the k largest (or
// smallest) elements and their Int64 positions (ONNX's TopK, torch.topk); hardmax {axis} gives 1
// at the first largest element and 0 elsewhere (ONNX's Hardmax).
//
// The order: by value, ties by position (the smaller first, as a stable sort), and NaN ranks above
// every number and equal to other NaNs. So with largest the NaNs come first, and with smallest they
// come last, as numpy's sort puts them; hardmax marks a row's first NaN, as numpy's argmax and the
// argmax op do. top_k's `sorted` = false is accepted and gives the same sorted order (ONNX leaves
// the order unspecified then). k must be in [0, length of axis]; hardmax over an empty axis gives
// an empty result.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <utility>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr int64_t kTarget = int64_t{1} << 15;  // elements per parallel chunk

// (outer, length, inner) of a shape around axis.
struct AxisSplit {
  int64_t outer = 1, count = 1, inner = 1;
};

AxisSplit split_at(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < axis; ++d) s.outer *= shape[d];
  s.count = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

// ---- top_k ----

std::vector<TensorType> infer_top_k(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "top_k";
  check_dtype(kOp, in[0].dtype, kNumericTypes);
  const Shape& shape = in[0].shape;
  MF_CHECK(!shape.empty(), InvalidArgument, "top_k: x must have rank >= 1, got a scalar");
  const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", kOp), rank_of(in[0]), kOp);
  const int64_t k = ir::attr_int(attrs, "k", kOp);
  MF_CHECK(k >= 0 && k <= shape[axis], InvalidArgument, "top_k: k = ", k, " must be in [0, ",
           shape[axis], "], the length of axis ", axis, " of x ", ir::shape_to_string(shape));
  ir::attr_bool(attrs, "largest", kOp);
  ir::attr_bool(attrs, "sorted", kOp);
  Shape out = shape;
  out[axis] = k;
  return {{in[0].dtype, out}, {DType::kInt64, out}};
}

// Whether (a at position ia) comes before (b at ib) in top_k's order. Positions differ, so this is
// a strict total order: the k selected and their order are unique.
template <typename T>
bool comes_before(bool largest, T a, int64_t ia, T b, int64_t ib) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return ia < ib;
      return largest ? a_nan : b_nan;
    }
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

void top_k_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& shape = x.type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  const int64_t k = ir::attr_int(ctx.attrs, "k", ctx.op_name);
  const bool largest = ir::attr_bool(ctx.attrs, "largest", ctx.op_name);
  const AxisSplit s = split_at(shape, axis);
  MF_CHECK(k >= 0 && k <= s.count, InvalidArgument, ctx.op_name, ": k = ", k,
           " is out of range for axis ", axis, " of x ", ir::shape_to_string(shape));
  if (k == 0 || s.outer == 0 || s.inner == 0) return;
  int64_t* positions = ctx.outputs[1].as<int64_t>();
  ir::visit_dtype(x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = x.as<T>();
    T* values = ctx.outputs[0].as<T>();
    // One column (o, i) per step: its elements gathered, the first k of the order selected.
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, kTarget / s.count),
                 [&](int64_t begin, int64_t end) {
                   std::vector<T> column(s.count);
                   std::vector<int64_t> order(s.count);
                   auto before = [&](int64_t a, int64_t b) {
                     return comes_before<T>(largest, column[a], a, column[b], b);
                   };
                   for (int64_t c = begin; c < end; ++c) {
                     const int64_t o = c / s.inner, i = c % s.inner;
                     const T* src = data + o * s.count * s.inner + i;
                     for (int64_t r = 0; r < s.count; ++r) column[r] = src[r * s.inner];
                     std::iota(order.begin(), order.end(), int64_t{0});
                     if (k < s.count) {
                       std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
                     } else {
                       std::sort(order.begin(), order.end(), before);
                     }
                     const int64_t first = o * k * s.inner + i;
                     for (int64_t j = 0; j < k; ++j) {
                       values[first + j * s.inner] = column[order[j]];
                       positions[first + j * s.inner] = order[j];
                     }
                   }
                 });
  });
}

std::vector<RefTensor> top_k_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  const int64_t k = std::get<int64_t>(attrs.at("k"));
  const bool largest = std::get<bool>(attrs.at("largest"));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t count = shape[axis];
  Shape out_shape = shape;
  out_shape[axis] = k;
  RefTensor values = ref_tensor(out_shape), positions = ref_tensor(out_shape);
  // A stable sort by value alone (NaN above every number) keeps ties in position order.
  auto ranks_before = [largest](const std::pair<double, int64_t>& a,
                                const std::pair<double, int64_t>& b) {
    const bool a_nan = std::isnan(a.first), b_nan = std::isnan(b.first);
    if (a_nan || b_nan) return largest ? a_nan && !b_nan : b_nan && !a_nan;
    return largest ? a.first > b.first : a.first < b.first;
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<std::pair<double, int64_t>> column;
      for (int64_t r = 0; r < count; ++r) {
        column.emplace_back(in[0].values[(o * count + r) * inner + i], r);
      }
      std::stable_sort(column.begin(), column.end(), ranks_before);
      for (int64_t j = 0; j < k; ++j) {
        values.values[(o * k + j) * inner + i] = column[j].first;
        positions.values[(o * k + j) * inner + i] = static_cast<double>(column[j].second);
      }
    }
  }
  return {values, positions};
}

ir::Attrs top_k_attrs(int64_t k, int64_t axis, bool largest = true, bool sorted = true) {
  return {{"k", k}, {"axis", axis}, {"largest", largest}, {"sorted", sorted}};
}

// The Int32 and Int64 runs of each sample draw from [-10, 10]: ties are frequent there.
const ir::OpRegistration kTopK =
    ir::define_op("top_k")
        .arity(1)
        .outputs(2)
        .attr("k", ir::AttrKind::kInt, std::nullopt,
              "how many elements to keep, in [0, length of axis]")
        .attr("axis", ir::AttrKind::kInt, int64_t{-1},
              "the axis ranked along (negative counts from the end)")
        .attr("largest", ir::AttrKind::kBool, true, "keep the largest; false: the smallest")
        .attr("sorted", ir::AttrKind::kBool, true,
              "accepted for ONNX; the result is sorted either way")
        .traits(Trait::kPure)
        .infer(infer_top_k)
        .kernel(top_k_kernel)
        .reference(top_k_reference)
        .samples({
            sample({f32({3, 5})}, top_k_attrs(2, -1)),
            sample({f32({4, 9})}, top_k_attrs(4, 1, false)),
            sample({f32({6, 3})}, top_k_attrs(6, 0)),  // a whole column sorted, strided
            sample({f32({2, 7, 3})}, top_k_attrs(3, 1, true, false)),
            sample({f32({10})}, top_k_attrs(0, 0)),  // k = 0: empty outputs
            sample({f32({2, 300})}, top_k_attrs(17, -1, false)),
        })
        .doc(
            "(values, Int64 positions) of the k largest (or smallest) elements along axis, in "
            "order, ties by position, NaN largest (torch.topk, ONNX's TopK)")
        // dout of the values added back at their positions (output 1) in zeros shaped as x.
        .backward({.outputs = 0b10}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          b.set_grad(
              0, b.op("scatter_elements", {b.zeros_like(b.input_type(0)), b.output(1), b.dout(0)},
                      {{"axis", ir::attr_int(b.attrs(), "axis", "top_k")},
                       {"reduction", std::string("add")}}));
        });

// ---- hardmax ----

// Whether a ranks strictly above b: NaN above every number, and not above another NaN.
template <typename T>
bool ranks_above(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(b)) return false;
    if (std::isnan(a)) return true;
  }
  return a > b;
}

void hardmax_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& shape = x.type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  if (x.size() == 0) return;
  const AxisSplit s = split_at(shape, axis);  // nonempty: every extent >= 1
  const int64_t block = s.count * s.inner;
  ir::visit_dtype(x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = x.as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(s.outer, std::max<int64_t>(1, kTarget / block), [&](int64_t begin, int64_t end) {
      std::vector<T> best(s.inner);
      std::vector<int64_t> position(s.inner);
      for (int64_t o = begin; o < end; ++o) {
        const T* in = data + o * block;
        T* out = y + o * block;
        std::copy_n(in, s.inner, best.begin());
        std::fill(position.begin(), position.end(), int64_t{0});
        for (int64_t r = 1; r < s.count; ++r) {
          const T* row = in + r * s.inner;
          for (int64_t i = 0; i < s.inner; ++i) {
            if (ranks_above<T>(row[i], best[i])) {
              best[i] = row[i];
              position[i] = r;
            }
          }
        }
        std::fill_n(out, block, T(0));
        for (int64_t i = 0; i < s.inner; ++i) out[position[i] * s.inner + i] = T(1);
      }
    });
  });
}

std::vector<RefTensor> hardmax_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t count = shape[axis];
  RefTensor out = ref_tensor(shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t r) { return (o * count + r) * inner + i; };
      int64_t best = -1;
      for (int64_t r = 0; r < count; ++r) {
        const double v = in[0].values[at(r)];
        if (best < 0) {
          best = r;
          continue;
        }
        const double b = in[0].values[at(best)];
        if (!std::isnan(b) && (std::isnan(v) || v > b)) best = r;
      }
      if (best >= 0) out.values[at(best)] = 1.0;
    }
  }
  return {out};
}

const ir::OpRegistration kHardmax =
    ir::define_op("hardmax")
        .arity(1)
        .attr("axis", ir::AttrKind::kInt, int64_t{-1},
              "the axis of the one-hot (negative counts from the end)")
        // A one-hot of the argmax: flat wherever it is differentiable.
        .traits(Trait::kPure | Trait::kNoGradient)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          check_dtype("hardmax", in[0].dtype, kNumericTypes);
          MF_CHECK(!in[0].shape.empty(), InvalidArgument,
                   "hardmax: x must have rank >= 1, got a scalar");
          ir::normalize_axis(ir::attr_int(attrs, "axis", "hardmax"), rank_of(in[0]), "hardmax");
          return std::vector<TensorType>{in[0]};
        })
        .kernel(hardmax_kernel)
        .reference(hardmax_reference)
        .samples({
            sample({f32({3, 5})}), sample({f32({2, 3, 4})}, {{"axis", int64_t{1}}}),
            sample({f32({2, 3, 4})}, {{"axis", int64_t{0}}}), sample({f32({7})}),
            sample({f32({3, 1, 5})}, {{"axis", int64_t{-2}}}),  // an axis of one
        })
        .doc(
            "1 at the first largest element along axis (NaN largest), 0 elsewhere, in x's dtype "
            "(ONNX's Hardmax)");

}  // namespace
}  // namespace mf::runtime::ops
