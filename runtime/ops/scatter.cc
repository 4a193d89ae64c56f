// Ops that read or write elements through index tensors, beside gather (gather.cc):
// gather_elements and scatter_elements pick or write single elements along one axis (ONNX's
// GatherElements, ScatterElements and the older Scatter; numpy's take_along_axis and
// put_along_axis), gather_nd and scatter_nd pick or write whole slices addressed by index tuples
// along the last axis of indices (ONNX's GatherND, ScatterND).
//
// Indices are Int32 or Int64; a negative index counts from the end of its axis. Every index is
// checked before anything is written, even where the output is empty: one out of range is an
// InvalidArgument at run time, in the kernel and the reference alike, never an access past a
// buffer.
//
// The scatters start from a copy of data and apply the updates in index order (the row-major
// order of indices). With reduction "none" a position written twice keeps the last write in that
// order; "add", "mul", "max" and "min" combine each update with what is there (max and min
// propagate NaN, as numpy's maximum; integer add and mul wrap around). Each output element is
// updated by one task in that order, so the bits never depend on the thread count. Bool data takes
// reduction "none" only. The gathers move bytes without interpreting them: every dtype.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr int64_t kTarget = int64_t{1} << 15;  // elements per parallel chunk
constexpr std::initializer_list<DType> kIndexTypes = {DType::kInt32, DType::kInt64};

// ---- shared by the four ops ----

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction reduction_of(std::string_view op, const Attrs& attrs) {
  const std::string& r = ir::attr_string(attrs, "reduction", op);
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  MF_FAIL(InvalidArgument, op,
          ": reduction must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \"", echo(r, 40),
          "\"");
}

// The scatters' checks of updates and reduction against data.
void check_updates(std::string_view op, std::span<const TensorType> in, const Shape& expected,
                   std::string_view rule, const Attrs& attrs) {
  MF_CHECK(in[2].dtype == in[0].dtype, InvalidArgument, op, ": updates are ",
           ir::dtype_name(in[2].dtype), " but data is ", ir::dtype_name(in[0].dtype),
           "; insert a cast");
  MF_CHECK(in[2].shape == expected, InvalidArgument, op, ": updates must have shape ",
           ir::shape_to_string(expected), " (", rule, ", for data ",
           ir::shape_to_string(in[0].shape), " and indices ", ir::shape_to_string(in[1].shape),
           "), got ", ir::shape_to_string(in[2].shape));
  const Reduction r = reduction_of(op, attrs);
  MF_CHECK(in[0].dtype != DType::kBool || r == Reduction::kNone, InvalidArgument, op,
           ": reduction \"", ir::attr_string(attrs, "reduction", op),
           "\" does not support Bool data; only \"none\" does");
}

// The raw values of an Int32 or Int64 index tensor.
std::vector<int64_t> index_values(const ir::TensorView& v) {
  std::vector<int64_t> out(static_cast<size_t>(v.size()));
  if (out.empty()) return out;
  if (v.type.dtype == DType::kInt32) {
    std::copy_n(v.as<int32_t>(), out.size(), out.begin());
  } else {
    std::copy_n(v.as<int64_t>(), out.size(), out.begin());
  }
  return out;
}

// `index` into axis `axis` of data (of size `dim`), negative values counted from the end.
int64_t checked_index(std::string_view op, int64_t index, int64_t dim, int64_t axis) {
  const int64_t v = index < 0 ? index + dim : index;
  MF_CHECK(v >= 0 && v < dim, InvalidArgument, op, ": index ", index, " is out of range for axis ",
           axis, " of data, of size ", dim, "; indices must be in [", -dim, ", ", dim, ")");
  return v;
}

// Row-major strides of `shape` in elements (0 before an empty axis).
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// sum(c[d] * strides[d]) for every coordinate c over shape[first, last), in row-major order.
std::vector<int64_t> coordinate_offsets(const Shape& shape, const std::vector<int64_t>& strides,
                                        size_t first, size_t last) {
  std::vector<int64_t> out{0};
  for (size_t d = first; d < last; ++d) {
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<size_t>(shape[d]));
    for (int64_t o : out) {
      for (int64_t c = 0; c < shape[d]; ++c) next.push_back(o + c * strides[d]);
    }
    out = std::move(next);
  }
  return out;
}

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

// Calls fn(Bytes<N>{}) with N the dtype's size: ops that only move elements are instantiated per
// element size, not per dtype (elements are copied with memcpy of sizeof(Bytes<N>)).
template <size_t N>
struct Bytes {
  char b[N];
};

template <typename Fn>
void visit_size(DType dtype, Fn&& fn) {
  switch (ir::dtype_size(dtype)) {
    case 1:
      fn(Bytes<1>{});
      break;
    case 4:
      fn(Bytes<4>{});
      break;
    default:
      fn(Bytes<8>{});
      break;
  }
}

// out = reduce(out, u); integer add and mul wrap around instead of overflowing.
template <typename T>
void combine(Reduction r, T& out, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    out = u;  // inference admits Bool with "none" only
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (r) {
      case Reduction::kNone:
        out = u;
        break;
      case Reduction::kAdd:
        out = static_cast<T>(static_cast<U>(out) + static_cast<U>(u));
        break;
      case Reduction::kMul:
        out = static_cast<T>(static_cast<U>(out) * static_cast<U>(u));
        break;
      case Reduction::kMax:
        out = std::max(out, u);
        break;
      case Reduction::kMin:
        out = std::min(out, u);
        break;
    }
  } else {
    switch (r) {
      case Reduction::kNone:
        out = u;
        break;
      case Reduction::kAdd:
        out += u;
        break;
      case Reduction::kMul:
        out *= u;
        break;
      case Reduction::kMax:  // a NaN on either side stays
        if (u > out || std::isnan(u)) out = u;
        break;
      case Reduction::kMin:
        if (u < out || std::isnan(u)) out = u;
        break;
    }
  }
}

// The scatters' output starts as data.
void copy_data(const ir::KernelContext& ctx) {
  const size_t bytes =
      static_cast<size_t>(ctx.inputs[0].size()) * ir::dtype_size(ctx.inputs[0].type.dtype);
  if (bytes > 0 && ctx.outputs[0].data != ctx.inputs[0].data) {
    std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data, bytes);
  }
}

// The reference's reduction, in double.
double ref_combine(const std::string& r, double out, double u) {
  if (r == "add") return out + u;
  if (r == "mul") return out * u;
  if (r == "max") return std::isnan(out) || std::isnan(u) ? NAN : std::max(out, u);
  if (r == "min") return std::isnan(out) || std::isnan(u) ? NAN : std::min(out, u);
  return u;
}

// A reference index, normalized and checked.
int64_t ref_index(std::string_view op, double value, int64_t dim) {
  int64_t v = static_cast<int64_t>(value);
  if (v < 0) v += dim;
  MF_CHECK(v >= 0 && v < dim, InvalidArgument, op, ": index ", value, " out of range [", -dim, ", ",
           dim, ")");
  return v;
}

// ---- gather_elements, scatter_elements ----

// Indices of data's rank, no longer than data on any axis but `axis`; returns axis, normalized.
int64_t check_element_indices(std::string_view op, std::span<const TensorType> in,
                              const Attrs& attrs) {
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  MF_CHECK(!ds.empty(), InvalidArgument, op, ": data must have rank >= 1, got a scalar");
  check_dtype(op, in[1].dtype, kIndexTypes, "as indices");
  const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", op), rank_of(in[0]), op);
  MF_CHECK(is.size() == ds.size(), InvalidArgument, op, ": indices ", ir::shape_to_string(is),
           " must have the rank of data ", ir::shape_to_string(ds), " (", ds.size(), ")");
  for (size_t d = 0; d < ds.size(); ++d) {
    MF_CHECK(int64_t(d) == axis || is[d] <= ds[d], InvalidArgument, op, ": indices ",
             ir::shape_to_string(is), " are longer than data ", ir::shape_to_string(ds),
             " on axis ", d, " (", is[d], " > ", ds[d], "); only axis ", axis,
             " (the indexed one) may be longer");
  }
  return axis;
}

// Where element (o, j, i) of indices (split around axis) lands in data, but for its index along
// axis: outer[o] + inner[i] (data's strides at indices' coordinates).
struct ElementPlan {
  int64_t axis = 0;
  AxisSplit split;
  std::vector<int64_t> outer, inner;
  int64_t step = 0;  // data's stride along axis
  std::vector<int64_t> index;
};

ElementPlan element_plan(const ir::KernelContext& ctx) {
  const Shape& ds = ctx.inputs[0].type.shape;
  const Shape& is = ctx.inputs[1].type.shape;
  ElementPlan p;
  p.axis = ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), ds.size(), ctx.op_name);
  p.index = index_values(ctx.inputs[1]);
  for (int64_t& v : p.index) v = checked_index(ctx.op_name, v, ds[p.axis], p.axis);
  if (p.index.empty()) return p;
  const std::vector<int64_t> strides = strides_of(ds);
  p.split = split_at(is, p.axis);
  p.outer = coordinate_offsets(is, strides, 0, p.axis);
  p.inner = coordinate_offsets(is, strides, p.axis + 1, is.size());
  p.step = strides[p.axis];
  return p;
}

void gather_elements_kernel(const ir::KernelContext& ctx) {
  const ElementPlan p = element_plan(ctx);
  if (p.index.empty()) return;
  const char* src = static_cast<const char*>(ctx.inputs[0].data);
  char* dst = static_cast<char*>(ctx.outputs[0].data);
  const AxisSplit& s = p.split;
  visit_size(ctx.inputs[0].type.dtype, [&](auto tag) {
    constexpr size_t kSize = sizeof(tag);
    parallel_for(s.outer * s.count, std::max<int64_t>(1, kTarget / s.inner),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t row = begin; row < end; ++row) {
                     const int64_t base = p.outer[row / s.count];
                     const int64_t* index = p.index.data() + row * s.inner;
                     char* out = dst + row * s.inner * int64_t(kSize);
                     for (int64_t i = 0; i < s.inner; ++i) {
                       std::memcpy(out + i * int64_t(kSize),
                                   src + (base + index[i] * p.step + p.inner[i]) * int64_t(kSize),
                                   kSize);
                     }
                   }
                 });
  });
}

std::vector<RefTensor> gather_elements_reference(std::span<const RefTensor> in,
                                                 const Attrs& attrs) {
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(ds.size());
  RefTensor out = ref_tensor(is);
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    std::vector<int64_t> c = ref_unravel(e, is);
    c[axis] = ref_index("gather_elements", in[1].values[e], ds[axis]);
    out.values[e] = in[0].values[ref_ravel(c, ds)];
  }
  return {out};
}

ir::Attrs axis_attrs(int64_t axis) {
  return {{"axis", axis}};
}

// Backward: dout added back at the picked positions of zeros shaped as data.
void gather_elements_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const ir::GradValue zeros = b.zeros_like(b.input_type(0));
  b.set_grad(0, b.op("scatter_elements", {zeros, b.input(1), b.dout(0)},
                     {{"axis", ir::attr_int(b.attrs(), "axis", "gather_elements")},
                      {"reduction", std::string("add")}}));
}

// Samples drawn from [-0.4, 0.4] give integer indices in [-2, 2] (integers are scaled by 5), valid
// for an axis of 3 or more; the others draw indices from [-10, 10] for an axis of 11 or more.
const ir::OpRegistration kGatherElements =
    ir::define_op("gather_elements")
        .arity(2)
        .attr("axis", ir::AttrKind::kInt, int64_t{0},
              "the axis of data that indices pick along (negative counts from the end)")
        .traits(Trait::kPure)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          check_element_indices("gather_elements", in, attrs);
          return std::vector<TensorType>{{in[0].dtype, in[1].shape}};
        })
        .kernel(gather_elements_kernel)
        .reference(gather_elements_reference)
        .samples({
            sample({f32({3, 4}), i64({3, 4})}, axis_attrs(0), -0.4, 0.4),
            sample({f32({2, 11, 3}), i32({2, 5, 3})}, axis_attrs(1)),
            sample({f32({4, 5, 6}), i64({3, 2, 4})}, axis_attrs(-1), -0.4, 0.4),
            sample({f32({12}), i64({20})}, axis_attrs(0)),
            sample({i64({3, 11}), i64({3, 4})}, axis_attrs(1)),
        })
        .doc(
            "y[i][j][k] = data[indices[i][j][k]][j][k] for axis 0 (and likewise for the others): "
            "y has the shape of indices (numpy's take_along_axis, ONNX's GatherElements)")
        .backward({.inputs = 0b10}, gather_elements_backward);

void scatter_elements_kernel(const ir::KernelContext& ctx) {
  const Reduction r = reduction_of(ctx.op_name, ctx.attrs);
  const ElementPlan p = element_plan(ctx);  // every index checked before the output is touched
  copy_data(ctx);
  if (p.index.empty()) return;
  const AxisSplit& s = p.split;
  // Tasks own blocks of (o, i) columns and walk each column's j in order: an output element is
  // written from one column only (its coordinates but axis are the column's), so in index order.
  constexpr int64_t kWidth = 1024;
  const int64_t blocks = (s.inner + kWidth - 1) / kWidth;
  const int64_t grain =
      std::max<int64_t>(1, kTarget / std::max<int64_t>(1, s.count * std::min(s.inner, kWidth)));
  ir::visit_dtype(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* updates = ctx.inputs[2].as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(s.outer * blocks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / blocks;
        const int64_t i0 = item % blocks * kWidth;
        const int64_t i1 = std::min(s.inner, i0 + kWidth);
        for (int64_t j = 0; j < s.count; ++j) {
          const int64_t row = (o * s.count + j) * s.inner;
          for (int64_t i = i0; i < i1; ++i) {
            combine<T>(r, y[p.outer[o] + p.index[row + i] * p.step + p.inner[i]], updates[row + i]);
          }
        }
      }
    });
  });
}

std::vector<RefTensor> scatter_elements_reference(std::span<const RefTensor> in,
                                                  const Attrs& attrs) {
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(ds.size());
  const std::string& r = std::get<std::string>(attrs.at("reduction"));
  RefTensor out = in[0];
  for (int64_t e = 0; e < static_cast<int64_t>(in[1].values.size()); ++e) {
    std::vector<int64_t> c = ref_unravel(e, is);
    c[axis] = ref_index("scatter_elements", in[1].values[e], ds[axis]);
    double& target = out.values[ref_ravel(c, ds)];
    target = ref_combine(r, target, in[2].values[e]);
  }
  return {out};
}

// Backward of the scatters, shared by scatter_elements and scatter_nd: `scatter` and `gather` are
// the op and its gather (gather_elements, gather_nd), which picks from a tensor shaped as data one
// value per element of updates. With g = dout:
//   add:      ddata = g, dupdates = gather(g).
//   none:     the last write wins: ddata = g where nothing was written, dupdates = gather(g) for
//             the winners (each update element's id scattered into an Int64 map and gathered
//             back: an element won where its own id came back).
//   mul:      each factor's gradient is g times the product of the others at its position,
//             without dividing by zero (as reduce_prod: with p the product of the nonzero factors
//             and z their count of zeros, p / f where z = 0, p at a lone zero, else 0).
//   max, min: the factors equal to the result share g evenly (as reduce_max).
struct ScatterOps {
  std::string_view scatter, gather;
  ir::Attrs scatter_attrs, gather_attrs;  // scatter_attrs without its reduction
};

void scatter_backward(ir::GradBuilder& b, const ScatterOps& ops) {
  const Reduction r = reduction_of(ops.scatter, b.attrs());
  const TensorType& data_type = b.input_type(0);
  const ir::GradValue g = b.dout(0), indices = b.input(1);
  const auto scatter = [&](ir::GradValue into, ir::GradValue what, std::string reduction) {
    ir::Attrs attrs = ops.scatter_attrs;
    attrs["reduction"] = std::move(reduction);
    return b.op(ops.scatter, {into, indices, what}, attrs);
  };
  const auto gather = [&](ir::GradValue from) {
    return b.op(ops.gather, {from, indices}, ops.gather_attrs);
  };
  const auto as_float = [&](ir::GradValue v) {
    return b.op("cast", {v}, {{"dtype", data_type.dtype}});
  };
  const ir::GradValue zero = scalar_like(b, 0), one = scalar_like(b, 1);
  if (r == Reduction::kAdd || r == Reduction::kNone) {
    if (r == Reduction::kAdd) {
      if (b.wants_grad(0)) b.set_grad(0, g);
      if (b.wants_grad(2)) b.set_grad(2, gather(g));
      return;
    }
    if (b.wants_grad(0)) b.set_grad(0, scatter(g, b.zeros_like(b.input_type(2)), "none"));
    if (!b.wants_grad(2)) return;
    const int64_t count = ir::num_elements(b.input_type(2).shape);
    const ir::GradValue ids = reshape_to(
        b,
        b.op("range", {}, {{"start", 1.0}, {"limit", double(count + 1)}, {"dtype", DType::kInt64}}),
        b.input_type(2).shape);
    const ir::GradValue winners =
        scatter(b.zeros_like({DType::kInt64, data_type.shape}), ids, "none");
    const ir::GradValue won = b.op("equal", {gather(winners), ids});
    b.set_grad(2, b.op("select", {won, gather(g), zero}));
    return;
  }
  const ir::GradValue data = b.input(0), updates = b.input(2);
  if (r == Reduction::kMul) {
    const ir::GradValue data_zero = b.op("equal", {data, zero});
    const ir::GradValue update_zero = b.op("equal", {updates, zero});
    const ir::GradValue data_nonzero = b.op("select", {data_zero, one, data});
    const ir::GradValue update_nonzero = b.op("select", {update_zero, one, updates});
    const ir::GradValue product = scatter(data_nonzero, update_nonzero, "mul");
    const ir::GradValue zeros =
        b.op("add",
             {as_float(data_zero), scatter(b.zeros_like(data_type), as_float(update_zero), "add")});
    // The product of the others for factors `f` (nonzero form `nonzero`, zero mask `is_zero`)
    // at positions whose product and zero count are `p` and `z`.
    const auto others = [&](ir::GradValue p, ir::GradValue z, ir::GradValue nonzero,
                            ir::GradValue is_zero) {
      const ir::GradValue lone = b.op("logical_and", {b.op("equal", {z, one}), is_zero});
      return b.op("select", {b.op("equal", {z, zero}), b.op("div", {p, nonzero}),
                             b.op("select", {lone, p, zero})});
    };
    if (b.wants_grad(0)) {
      b.set_grad(0, b.op("mul", {g, others(product, zeros, data_nonzero, data_zero)}));
    }
    if (b.wants_grad(2)) {
      b.set_grad(2, b.op("mul", {gather(g), others(gather(product), gather(zeros), update_nonzero,
                                                   update_zero)}));
    }
    return;
  }
  const ir::GradValue y = b.output(0);
  const ir::GradValue data_hit = as_float(b.op("equal", {data, y}));
  const ir::GradValue update_hit = as_float(b.op("equal", {updates, gather(y)}));
  const ir::GradValue ties =
      b.op("add", {data_hit, scatter(b.zeros_like(data_type), update_hit, "add")});
  // A result equal to no factor (NaN) gives no gradient; its count is kept from 0.
  const ir::GradValue share = b.op("div", {g, b.op("maximum", {ties, one})});
  if (b.wants_grad(0)) b.set_grad(0, b.op("mul", {data_hit, share}));
  if (b.wants_grad(2)) b.set_grad(2, b.op("mul", {update_hit, gather(share)}));
}

ir::Attrs scatter_attrs(int64_t axis, std::string reduction) {
  return {{"axis", axis}, {"reduction", std::move(reduction)}};
}

const ir::OpRegistration kScatterElements =
    ir::define_op("scatter_elements")
        .arity(3)
        .attr("axis", ir::AttrKind::kInt, int64_t{0},
              "the axis of data that indices write along (negative counts from the end)")
        .attr("reduction", ir::AttrKind::kString, std::string("none"),
              "\"none\" (the last write wins), \"add\", \"mul\", \"max\" or \"min\"")
        .traits(Trait::kPure)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          check_element_indices("scatter_elements", in, attrs);
          check_updates("scatter_elements", in, in[1].shape, "the shape of indices", attrs);
          return std::vector<TensorType>{in[0]};
        })
        .kernel(scatter_elements_kernel)
        .reference(scatter_elements_reference)
        // Narrow ranges make duplicate indices frequent: the order of writes is checked.
        .samples({
            sample({f32({5, 4}), i64({3, 4}), f32({3, 4})}, scatter_attrs(0, "none"), -0.4, 0.4),
            sample({f32({2, 11, 3}), i32({2, 6, 3}), f32({2, 6, 3})}, scatter_attrs(1, "add")),
            sample({f32({4, 6}), i64({4, 3}), f32({4, 3})}, scatter_attrs(-1, "mul"), -0.4, 0.4),
            sample({f32({3, 5}), i64({3, 5}), f32({3, 5})}, scatter_attrs(1, "max"), -0.4, 0.4),
            sample({f32({6, 2}), i32({9, 2}), f32({9, 2})}, scatter_attrs(0, "min"), -0.4, 0.4),
            sample({f32({12}), i64({15}), f32({15})}, scatter_attrs(0, "none")),
        })
        .doc(
            "data with updates written along axis where indices say (for axis 0, "
            "y[indices[i][j]][j] = updates[i][j]), in index order; or combined by reduction "
            "(ONNX's ScatterElements)")
        // The output is read for max and min only, data and updates for mul, max and min.
        .backward({.inputs = 0b111, .outputs = 1}, [](ir::GradBuilder& b) {
          const int64_t axis = ir::attr_int(b.attrs(), "axis", "scatter_elements");
          scatter_backward(
              b, {"scatter_elements", "gather_elements", {{"axis", axis}}, {{"axis", axis}}});
        });

// ---- gather_nd, scatter_nd ----

// The offset in data of every index tuple (the last axis of indices holds k indices for data's
// axes [batch_dims, batch_dims + k)), checked; tuple t lies in batch t / (tuples per batch).
std::vector<int64_t> tuple_offsets(std::string_view op, const ir::TensorView& indices,
                                   const Shape& data, int64_t batch_dims) {
  const Shape& is = indices.type.shape;
  const int64_t k = is.back();
  const std::vector<int64_t> raw = index_values(indices);
  const std::vector<int64_t> strides = strides_of(data);
  int64_t batches = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batches *= data[d];
  const int64_t block = ir::num_elements(Shape(data.begin() + batch_dims, data.end()));
  const int64_t tuples = ir::num_elements(Shape(is.begin(), is.end() - 1));
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  if (tuples == 0) return offsets;
  const int64_t per_batch = tuples / batches;  // tuples > 0: no axis of the batch is empty
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = t / per_batch * block;
    for (int64_t d = 0; d < k; ++d) {
      const int64_t axis = batch_dims + d;
      offset += checked_index(op, raw[t * k + d], data[axis], axis) * strides[axis];
    }
    offsets[t] = offset;
  }
  return offsets;
}

void check_tuple_indices(std::string_view op, std::span<const TensorType> in) {
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, op, ": data must have rank >= 1, got a scalar");
  check_dtype(op, in[1].dtype, kIndexTypes, "as indices");
  MF_CHECK(!in[1].shape.empty(), InvalidArgument, op,
           ": indices must have rank >= 1 (index tuples along the last axis), got a scalar");
}

std::vector<TensorType> infer_gather_nd(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "gather_nd";
  check_tuple_indices(kOp, in);
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  const int64_t b = ir::attr_int(attrs, "batch_dims", kOp);
  const int64_t limit = std::min(rank_of(in[0]), rank_of(in[1]));
  MF_CHECK(b >= 0 && b < limit, InvalidArgument, kOp, ": batch_dims ", b,
           " must be in [0, min(rank of data, rank of indices)) = [0, ", limit, ") for data ",
           ir::shape_to_string(ds), " and indices ", ir::shape_to_string(is));
  for (int64_t d = 0; d < b; ++d) {
    MF_CHECK(is[d] == ds[d], InvalidArgument, kOp, ": the first ", b,
             " (batch_dims) axes of indices ", ir::shape_to_string(is), " and data ",
             ir::shape_to_string(ds), " must agree, but axis ", d, " differs");
  }
  const int64_t k = is.back();
  MF_CHECK(k <= rank_of(in[0]) - b, InvalidArgument, kOp, ": indices ", ir::shape_to_string(is),
           " hold tuples of ", k, " indices, but data ", ir::shape_to_string(ds), " has ",
           rank_of(in[0]) - b, " axes after batch_dims ", b);
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + b + k, ds.end());
  return {{in[0].dtype, out}};
}

void gather_nd_kernel(const ir::KernelContext& ctx) {
  const Shape& ds = ctx.inputs[0].type.shape;
  const int64_t b = ir::attr_int(ctx.attrs, "batch_dims", ctx.op_name);
  const int64_t k = ctx.inputs[1].type.shape.back();
  const std::vector<int64_t> offsets = tuple_offsets(ctx.op_name, ctx.inputs[1], ds, b);
  const int64_t slice = ir::num_elements(Shape(ds.begin() + b + k, ds.end()));
  if (offsets.empty() || slice == 0) return;
  const size_t elem = ir::dtype_size(ctx.inputs[0].type.dtype);
  const size_t bytes = static_cast<size_t>(slice) * elem;
  const char* src = static_cast<const char*>(ctx.inputs[0].data);
  char* dst = static_cast<char*>(ctx.outputs[0].data);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / static_cast<int64_t>(bytes));
  parallel_for(static_cast<int64_t>(offsets.size()), grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      std::memcpy(dst + t * bytes, src + offsets[t] * elem, bytes);
    }
  });
}

std::vector<RefTensor> gather_nd_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  const int64_t b = std::get<int64_t>(attrs.at("batch_dims"));
  const int64_t k = is.back();
  const Shape batch_shape(ds.begin(), ds.begin() + b);
  const Shape slice_shape(ds.begin() + b + k, ds.end());
  const int64_t tuples = ir::num_elements(Shape(is.begin(), is.end() - 1));
  const int64_t per_batch = ir::num_elements(Shape(is.begin() + b, is.end() - 1));
  const int64_t slice = ir::num_elements(slice_shape);
  Shape out_shape(is.begin(), is.end() - 1);
  out_shape.insert(out_shape.end(), slice_shape.begin(), slice_shape.end());
  RefTensor out = ref_tensor(out_shape);
  for (int64_t t = 0; t < tuples; ++t) {
    std::vector<int64_t> c = ref_unravel(t / per_batch, batch_shape);
    for (int64_t d = 0; d < k; ++d) {
      c.push_back(ref_index("gather_nd", in[1].values[t * k + d], ds[b + d]));
    }
    c.resize(ds.size());
    for (int64_t s = 0; s < slice; ++s) {
      const std::vector<int64_t> sc = ref_unravel(s, slice_shape);
      std::copy(sc.begin(), sc.end(), c.begin() + b + k);
      out.values[t * slice + s] = in[0].values[ref_ravel(c, ds)];
    }
  }
  return {out};
}

// Backward: dout added back at the addressed slices of zeros shaped as data, by scatter_nd. Batch
// axes become leading indices of each tuple (their coordinates from range, broadcast over the
// tuples), since scatter_nd has no batch_dims.
void gather_nd_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const TensorType& data = b.input_type(0);
  const TensorType& indices = b.input_type(1);
  const int64_t batch = ir::attr_int(b.attrs(), "batch_dims", "gather_nd");
  ir::GradValue tuples = b.input(1);
  if (batch > 0) {
    Shape tuple_shape = indices.shape;
    tuple_shape.back() = 1;
    std::vector<ir::GradValue> parts;
    for (int64_t d = 0; d < batch; ++d) {
      const ir::GradValue coord =
          b.op("range", {}, {{"limit", double(data.shape[d])}, {"dtype", indices.dtype}});
      Shape along(tuple_shape.size(), 1);
      along[d] = data.shape[d];
      parts.push_back(broadcast_to(b, reshape_to(b, coord, along), tuple_shape));
    }
    parts.push_back(tuples);
    tuples = b.op("concat", parts, {{"axis", int64_t{-1}}});
  }
  b.set_grad(0, b.op("scatter_nd", {b.zeros_like(data), tuples, b.dout(0)},
                     {{"reduction", std::string("add")}}));
}

const ir::OpRegistration kGatherNd =
    ir::define_op("gather_nd")
        .arity(2)
        .attr("batch_dims", ir::AttrKind::kInt, int64_t{0},
              "leading axes that data and indices share, gathered batch by batch")
        .traits(Trait::kPure)
        .infer(infer_gather_nd)
        .kernel(gather_nd_kernel)
        .reference(gather_nd_reference)
        .samples({
            sample({f32({4, 5, 6}), i64({3, 2})}, {}, -0.4, 0.4),
            sample({f32({2, 11, 3}), i32({2, 4, 1})}, {{"batch_dims", int64_t{1}}}),
            sample({f32({3, 4}), i64({2, 3, 2})}, {}, -0.4, 0.4),  // whole tuples: scalars
            sample({f32({12, 2}), i64({5, 1})}),
            sample({f32({2, 3, 4}), i64({2, 3, 1})}, {{"batch_dims", int64_t{2}}}, -0.4, 0.4),
        })
        .doc(
            "slices of data addressed by the index tuples along the last axis of indices: y has "
            "shape indices.shape[:-1] + data.shape[batch_dims + k:] (ONNX's GatherND)")
        .backward({.inputs = 0b10}, gather_nd_backward);

std::vector<TensorType> infer_scatter_nd(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "scatter_nd";
  check_tuple_indices(kOp, in);
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  const int64_t k = is.back();
  MF_CHECK(k <= rank_of(in[0]), InvalidArgument, kOp, ": indices ", ir::shape_to_string(is),
           " hold tuples of ", k, " indices, more than the rank of data ", ir::shape_to_string(ds),
           " (", ds.size(), ")");
  Shape expected(is.begin(), is.end() - 1);
  expected.insert(expected.end(), ds.begin() + k, ds.end());
  check_updates(kOp, in, expected, "indices.shape[:-1] + data.shape[k:]", attrs);
  return {in[0]};
}

void scatter_nd_kernel(const ir::KernelContext& ctx) {
  const Reduction r = reduction_of(ctx.op_name, ctx.attrs);
  const Shape& ds = ctx.inputs[0].type.shape;
  const int64_t k = ctx.inputs[1].type.shape.back();
  const std::vector<int64_t> offsets = tuple_offsets(ctx.op_name, ctx.inputs[1], ds, 0);
  copy_data(ctx);
  const int64_t slice = ir::num_elements(Shape(ds.begin() + k, ds.end()));
  const int64_t tuples = static_cast<int64_t>(offsets.size());
  if (tuples == 0 || slice == 0) return;
  // Tasks own ranges of positions within a slice and walk the tuples in order over them.
  ir::visit_dtype(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* updates = ctx.inputs[2].as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(slice, std::max<int64_t>(1, kTarget / tuples), [&](int64_t begin, int64_t end) {
      for (int64_t t = 0; t < tuples; ++t) {
        T* dst = y + offsets[t];
        const T* src = updates + t * slice;
        for (int64_t c = begin; c < end; ++c) combine<T>(r, dst[c], src[c]);
      }
    });
  });
}

std::vector<RefTensor> scatter_nd_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& ds = in[0].shape;
  const Shape& is = in[1].shape;
  const std::string& r = std::get<std::string>(attrs.at("reduction"));
  const int64_t k = is.back();
  const Shape slice_shape(ds.begin() + k, ds.end());
  const int64_t tuples = ir::num_elements(Shape(is.begin(), is.end() - 1));
  const int64_t slice = ir::num_elements(slice_shape);
  RefTensor out = in[0];
  for (int64_t t = 0; t < tuples; ++t) {
    std::vector<int64_t> c(ds.size(), 0);
    for (int64_t d = 0; d < k; ++d) c[d] = ref_index("scatter_nd", in[1].values[t * k + d], ds[d]);
    for (int64_t s = 0; s < slice; ++s) {
      const std::vector<int64_t> sc = ref_unravel(s, slice_shape);
      std::copy(sc.begin(), sc.end(), c.begin() + k);
      double& target = out.values[ref_ravel(c, ds)];
      target = ref_combine(r, target, in[2].values[t * slice + s]);
    }
  }
  return {out};
}

ir::Attrs reduction_attrs(std::string reduction) {
  return {{"reduction", std::move(reduction)}};
}

const ir::OpRegistration kScatterNd =
    ir::define_op("scatter_nd")
        .arity(3)
        .attr("reduction", ir::AttrKind::kString, std::string("none"),
              "\"none\" (the last write wins), \"add\", \"mul\", \"max\" or \"min\"")
        .traits(Trait::kPure)
        .infer(infer_scatter_nd)
        .kernel(scatter_nd_kernel)
        .reference(scatter_nd_reference)
        .samples({
            sample({f32({4, 5, 6}), i64({3, 2}), f32({3, 6})}, reduction_attrs("none"), -0.4, 0.4),
            sample({f32({8}), i64({10, 1}), f32({10})}, reduction_attrs("add"), -0.4, 0.4),
            sample({f32({3, 4}), i32({5, 2}), f32({5})}, reduction_attrs("mul"), -0.4, 0.4),
            sample({f32({12, 3}), i64({2, 4, 1}), f32({2, 4, 3})}, reduction_attrs("max")),
            sample({f32({5, 3}), i64({6, 1}), f32({6, 3})}, reduction_attrs("min"), -0.4, 0.4),
            // Tuples of no index address all of data: the last of the four updates wins.
            sample({f32({2, 3}), i64({4, 0}), f32({4, 2, 3})}, reduction_attrs("none")),
        })
        .doc(
            "data with slices of updates written at the index tuples along the last axis of "
            "indices, in index order; or combined by reduction (ONNX's ScatterND)")
        // The output is read for max and min only, data and updates for mul, max and min.
        .backward({.inputs = 0b111, .outputs = 1}, [](ir::GradBuilder& b) {
          scatter_backward(b, {"scatter_nd", "gather_nd", {}, {}});
        });

}  // namespace
}  // namespace mf::runtime::ops
