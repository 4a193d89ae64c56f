// Ops about positions: argmax and argmin give the position of the extreme along one axis, range
// gives evenly spaced values (a sequence of positions, most often).
//
// argmax, argmin {axis, keep_dims, select_last_index}: Int64 positions along axis (numpy's argmax,
// ONNX's ArgMax / ArgMin). A tie gives the first position, or the last with select_last_index. NaN
// ranks above every number and equal to other NaNs, in both ops, as numpy's argmax and argmin
// both return the first NaN: a row holding NaN gives its first NaN's position (its last with
// select_last_index). An empty axis has no extreme and is refused at inference.
//
// range {start, limit, delta, dtype}: start + i * delta for i in [0, max(ceil((limit - start) /
// delta), 0)) (numpy's arange, ONNX's Range), computed in double for every element (not by
// repeated addition) and stored in dtype. Integer dtypes need integral start and delta, and every
// value must fit the dtype; the count is checked against 2^40 before anything is allocated.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

// ---- argmax, argmin ----

// Whether `a` ranks strictly above `b`: for argmax the larger, for argmin the smaller; NaN above
// every number in both, and not above another NaN.
template <bool kMax, typename T>
bool ranks_above(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(b)) return false;
    if (std::isnan(a)) return true;
  }
  return kMax ? a > b : a < b;
}

template <bool kMax>
ir::InferFn infer_arg(std::string op) {
  return [op = std::move(op)](std::span<const TensorType> in, const Attrs& attrs) {
    check_dtype(op, in[0].dtype, kAllTypes);
    MF_CHECK(!in[0].shape.empty(), InvalidArgument, op, ": x must have rank >= 1, got a scalar");
    const Shape& shape = in[0].shape;
    const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", op), rank_of(in[0]), op);
    MF_CHECK(shape[axis] > 0, InvalidArgument, op, ": axis ", axis, " of x ",
             ir::shape_to_string(shape), " is empty; an empty axis has no ",
             kMax ? "largest" : "smallest", " element");
    Shape out = shape;
    if (ir::attr_bool(attrs, "keep_dims", op)) {
      out[axis] = 1;
    } else {
      out.erase(out.begin() + axis);
    }
    return std::vector<TensorType>{{DType::kInt64, out}};
  };
}

// y[o, i] = the position along r of the extreme of x[o, r, i], for the inner columns
// [c0, c0 + width): rows of x are walked in order, `best` holding each column's extreme so far.
template <bool kMax, typename T>
void arg_columns(const T* x, int64_t count, int64_t inner, int64_t width, bool last, int64_t* y) {
  std::vector<T> best(x, x + width);
  std::fill(y, y + width, int64_t{0});
  for (int64_t r = 1; r < count; ++r) {
    const T* row = x + r * inner;
    for (int64_t i = 0; i < width; ++i) {
      // With select_last_index a value replaces the best unless the best ranks above it (a tie).
      const bool take =
          last ? !ranks_above<kMax, T>(best[i], row[i]) : ranks_above<kMax, T>(row[i], best[i]);
      if (take) {
        best[i] = row[i];
        y[i] = r;
      }
    }
  }
}

template <bool kMax>
void arg_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& shape = x.type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  const bool last = ir::attr_bool(ctx.attrs, "select_last_index", ctx.op_name);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t count = shape[axis];
  MF_CHECK(count > 0, InvalidArgument, ctx.op_name, ": axis ", axis, " of x ",
           ir::shape_to_string(shape), " is empty");
  if (outer == 0 || inner == 0) return;
  // Columns in blocks, so that a long inner extent is split across threads too; every output
  // element is computed by one task in one order, whatever the thread count.
  constexpr int64_t kWidth = 1024;
  const int64_t col_blocks = (inner + kWidth - 1) / kWidth;
  const int64_t grain = std::max<int64_t>(
      1, (int64_t{1} << 16) / std::max<int64_t>(1, count * std::min(inner, kWidth)));
  int64_t* y = ctx.outputs[0].as<int64_t>();
  ir::visit_dtype(x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = x.as<T>();
    parallel_for(outer * col_blocks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / col_blocks;
        const int64_t c0 = item % col_blocks * kWidth;
        const int64_t width = std::min(kWidth, inner - c0);
        arg_columns<kMax, T>(data + o * count * inner + c0, count, inner, width, last,
                             y + o * inner + c0);
      }
    });
  });
}

template <bool kMax>
std::vector<RefTensor> arg_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  const bool keep = std::get<bool>(attrs.at("keep_dims"));
  const bool last = std::get<bool>(attrs.at("select_last_index"));
  Shape kept = shape;
  kept[axis] = 1;
  RefTensor out = ref_tensor(kept);
  std::vector<double> best(out.values.size(), 0.0);
  std::vector<bool> seen(out.values.size(), false);
  // Row-major order visits each output's candidates in increasing position.
  for (int64_t i = 0; i < static_cast<int64_t>(in[0].values.size()); ++i) {
    std::vector<int64_t> c = ref_unravel(i, shape);
    const int64_t position = c[axis];
    c[axis] = 0;
    const int64_t o = ref_ravel(c, kept);
    const double v = in[0].values[i];
    bool take = !seen[o];
    if (!take) {
      const double b = best[o];
      const bool v_nan = std::isnan(v), b_nan = std::isnan(b);
      const bool above = !b_nan && (v_nan || (kMax ? v > b : v < b));
      const bool tie = (v_nan && b_nan) || v == b;
      take = above || (last && tie);
    }
    if (take) {
      best[o] = v;
      out.values[o] = static_cast<double>(position);
      seen[o] = true;
    }
  }
  if (!keep) out.shape.erase(out.shape.begin() + axis);
  return {out};
}

ir::Attrs arg_attrs(int64_t axis, bool keep_dims, bool select_last_index = false) {
  return {{"axis", axis}, {"keep_dims", keep_dims}, {"select_last_index", select_last_index}};
}

ir::OpBuilder declare_arg(std::string name, ir::KernelFn kernel, ir::ReferenceFn reference,
                          ir::InferFn infer, std::string doc) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(1)
      .attr("axis", ir::AttrKind::kInt, int64_t{0},
            "the axis searched (negative counts from the end)")
      .attr("keep_dims", ir::AttrKind::kBool, false, "keep the searched axis as size 1")
      .attr("select_last_index", ir::AttrKind::kBool, false,
            "on a tie give the last position instead of the first")
      .traits(Trait::kPure | Trait::kNoGradient)
      .infer(std::move(infer))
      .kernel(std::move(kernel))
      .reference(std::move(reference))
      // Integer samples draw from [-10, 10]: ties are frequent, and both tie rules are checked.
      .samples({
          sample({f32({7})}, arg_attrs(0, false)), sample({f32({3, 5})}, arg_attrs(1, true)),
          sample({f32({3, 5})}, arg_attrs(0, false, true)),
          sample({f32({2, 3, 4})}, arg_attrs(-2, false, true)),
          sample({f32({2, 1, 5})}, arg_attrs(1, true)),
          sample({f32({2, 3, 1030})}, arg_attrs(1, false)),  // two column blocks
      })
      .doc(std::move(doc));
  return b;
}

const ir::OpRegistration kArgmax = declare_arg(
    "argmax", arg_kernel<true>, arg_reference<true>, infer_arg<true>("argmax"),
    "Int64 position of the largest element along axis (first on a tie; NaN is largest)");
const ir::OpRegistration kArgmin = declare_arg(
    "argmin", arg_kernel<false>, arg_reference<false>, infer_arg<false>("argmin"),
    "Int64 position of the smallest element along axis (first on a tie; NaN wins, as numpy)");

// ---- range ----

struct RangeSpec {
  double start = 0, delta = 1;
  int64_t count = 0;
  DType dtype = DType::kFloat32;
};

// The largest magnitude each dtype holds exactly as a double: integers beyond 2^53 would be
// rounded before the kernel sees them.
double largest_exact(DType dtype) {
  switch (dtype) {
    case DType::kInt32:
      return 2147483647.0;
    case DType::kInt64:
      return 9007199254740992.0;  // 2^53
    case DType::kFloat32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

RangeSpec range_spec(const Attrs& attrs) {
  RangeSpec spec;
  spec.start = ir::attr_float(attrs, "start", "range");
  const double limit = ir::attr_float(attrs, "limit", "range");
  spec.delta = ir::attr_float(attrs, "delta", "range");
  spec.dtype = ir::attr_dtype(attrs, "dtype", "range");
  check_dtype("range", spec.dtype, kNumericTypes, "as dtype");
  MF_CHECK(std::isfinite(spec.start) && std::isfinite(limit) && std::isfinite(spec.delta),
           InvalidArgument, "range: start ", spec.start, ", limit ", limit, " and delta ",
           spec.delta, " must be finite");
  MF_CHECK(spec.delta != 0.0, InvalidArgument, "range: delta must not be 0 (start ", spec.start,
           ", limit ", limit, ")");
  // (limit - start) may overflow to an infinity: it then fails the bound below, or counts 0.
  const double steps = std::ceil((limit - spec.start) / spec.delta);
  MF_CHECK(steps <= static_cast<double>(ir::kMaxTensorElements), InvalidArgument, "range: start ",
           spec.start, ", limit ", limit, " and delta ", spec.delta, " give ", steps,
           " elements, more than 2^40 (", ir::kMaxTensorElements,
           "), the largest tensor supported");
  spec.count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  if (!ir::is_floating(spec.dtype)) {
    MF_CHECK(spec.start == std::trunc(spec.start) && spec.delta == std::trunc(spec.delta),
             InvalidArgument, "range: dtype ", ir::dtype_name(spec.dtype),
             " needs integral start and delta, got start ", spec.start, " and delta ", spec.delta);
    MF_CHECK(std::abs(spec.delta) <= largest_exact(spec.dtype), InvalidArgument, "range: delta ",
             spec.delta, " does not fit dtype ", ir::dtype_name(spec.dtype));
  }
  if (spec.count > 0) {
    // The values run monotonically from the first to the last: those two bound all the others.
    const double bound = largest_exact(spec.dtype);
    const double last = spec.start + static_cast<double>(spec.count - 1) * spec.delta;
    const double lowest = spec.dtype == DType::kInt32 ? -bound - 1 : -bound;
    MF_CHECK(spec.start >= lowest && spec.start <= bound && last >= lowest && last <= bound,
             InvalidArgument, "range: the values from ", spec.start, " to ", last,
             " do not fit dtype ", ir::dtype_name(spec.dtype),
             spec.dtype == DType::kInt64 ? " exactly (within 2^53)" : "",
             "; give a smaller range or a wider dtype");
  }
  return spec;
}

void range_kernel(const ir::KernelContext& ctx) {
  const RangeSpec spec = range_spec(ctx.attrs);
  const ir::TensorView& out = ctx.outputs[0];
  ir::visit_dtype(out.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      MF_FAIL(Internal, ctx.op_name, ": no kernel for Bool");
    } else {
      T* y = out.as<T>();
      parallel_for(spec.count, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
        if constexpr (std::is_floating_point_v<T>) {
          for (int64_t i = begin; i < end; ++i) {
            y[i] = static_cast<T>(spec.start + static_cast<double>(i) * spec.delta);
          }
        } else {
          // Exact in int64: start, delta and every value are within 2^53 (range_spec).
          const int64_t start = static_cast<int64_t>(spec.start);
          const int64_t delta = static_cast<int64_t>(spec.delta);
          for (int64_t i = begin; i < end; ++i) y[i] = static_cast<T>(start + i * delta);
        }
      });
    }
  });
}

ir::Attrs range_attrs(double start, double limit, double delta, DType dtype) {
  return {{"start", start}, {"limit", limit}, {"delta", delta}, {"dtype", dtype}};
}

const ir::OpRegistration kRange =
    ir::define_op("range")
        .inputs(0, 0)
        .attr("start", ir::AttrKind::kFloat, 0.0, "the first value")
        .attr("limit", ir::AttrKind::kFloat, std::nullopt, "the bound, not included")
        .attr("delta", ir::AttrKind::kFloat, 1.0, "the step, nonzero (negative counts down)")
        .attr("dtype", ir::AttrKind::kDType, DType::kFloat32, "the output dtype (not Bool)")
        .traits(Trait::kPure)
        .infer([](std::span<const TensorType>, const Attrs& attrs) {
          const RangeSpec spec = range_spec(attrs);
          return std::vector<TensorType>{{spec.dtype, {spec.count}}};
        })
        .kernel(range_kernel)
        .reference([](std::span<const RefTensor>, const Attrs& attrs) {
          const double start = ir::attr_float(attrs, "start", "range");
          const double limit = ir::attr_float(attrs, "limit", "range");
          const double delta = ir::attr_float(attrs, "delta", "range");
          MF_CHECK(delta != 0.0, InvalidArgument, "range: delta must not be 0");
          const double steps = std::max(std::ceil((limit - start) / delta), 0.0);
          RefTensor out = ref_tensor({static_cast<int64_t>(steps)});
          for (size_t i = 0; i < out.values.size(); ++i) {
            out.values[i] = start + static_cast<double>(i) * delta;
          }
          return std::vector<RefTensor>{out};
        })
        .samples({
            sample({}, range_attrs(0.0, 7.0, 1.0, DType::kFloat32)),
            sample({}, range_attrs(0.5, 3.25, 0.75, DType::kFloat32)),  // a partial last step
            sample({}, range_attrs(1.0, -2.0, -0.5, DType::kFloat64)),
            sample({}, range_attrs(-3.0, 10.0, 4.0, DType::kInt32)),
            sample({}, range_attrs(10.0, 6.0, -3.0, DType::kInt64)),
            sample({}, range_attrs(5.0, 5.0, 1.0, DType::kInt64)),  // empty
        })
        .doc("start, start + delta, ... up to limit (excluded), in dtype: numpy's arange");

}  // namespace
}  // namespace mf::runtime::ops
