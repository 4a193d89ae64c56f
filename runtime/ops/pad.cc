// pad {pads, mode, value}: every axis of x widened by pads (numpy's pad, ONNX's Pad), or, where a
// pad is negative, cropped by it. pads lists the begins of every axis, then the ends:
// [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}]. Negative pads crop first (at most the whole
// axis), then the positive ones pad the cropped axis:
//   "constant": with value (the attribute, or the one-element input 1 of x's dtype when given);
//   "edge":     with the cropped axis' first (last) element, which must exist;
//   "reflect":  with its mirror image, edge excluded (numpy's reflect): a pad p needs p < the
//               cropped axis' size, so reflecting needs at least 2 elements.
// Like the shape ops it moves bytes, so every dtype is supported: the value attribute must be
// exact in x's dtype (integral and in range for integers, 0 or 1 for Bool).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
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

enum class PadMode { kConstant, kReflect, kEdge };

PadMode pad_mode(const Attrs& attrs) {
  const std::string& mode = ir::attr_string(attrs, "mode", "pad");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  MF_FAIL(InvalidArgument, "pad: mode must be \"constant\", \"reflect\" or \"edge\", got \"",
          echo(mode, 40), "\"");
}

// One axis of the padding: x's size n, the pads, and the part of x kept after cropping,
// [lo, hi) in x's coordinates.
struct PadAxis {
  int64_t n = 0, begin = 0, end = 0, lo = 0, hi = 0, out = 0;
};

// The validated geometry of a pad of `shape`; every rule broken is an InvalidArgument naming it.
std::vector<PadAxis> pad_geometry(const Shape& shape, const Attrs& attrs) {
  const std::vector<int64_t>& pads = ir::attr_ints(attrs, "pads", "pad");
  const PadMode mode = pad_mode(attrs);
  const size_t rank = shape.size();
  MF_CHECK(pads.size() == 2 * rank, InvalidArgument, "pad: pads ", ints_to_string(pads),
           " must have 2 entries per axis of x ", ir::shape_to_string(shape), " (", 2 * rank,
           ": the begins of every axis, then the ends), got ", pads.size());
  std::vector<PadAxis> axes(rank);
  int64_t bound = 1;  // the output's element count, zero dimensions counted as 1 (ir/shape.h)
  for (size_t d = 0; d < rank; ++d) {
    PadAxis& a = axes[d];
    a.n = shape[d];
    a.begin = pads[d];
    a.end = pads[rank + d];
    // Each crop at most the axis, checked before negating (a pad of INT64_MIN must not wrap).
    MF_CHECK(a.begin >= -a.n && a.end >= -a.n, InvalidArgument, "pad: pads ", ints_to_string(pads),
             " crop axis ", d, " of x ", ir::shape_to_string(shape), " by more than its ", a.n,
             " elements");
    a.lo = std::max<int64_t>(0, -a.begin);
    a.hi = a.n - std::max<int64_t>(0, -a.end);
    const int64_t kept = a.hi - a.lo;
    MF_CHECK(kept >= 0, InvalidArgument, "pad: pads ", ints_to_string(pads), " crop axis ", d,
             " of x ", ir::shape_to_string(shape), " by ", a.lo, " + ", a.n - a.hi,
             " elements, more than its ", a.n);
    const int64_t grow_begin = std::max<int64_t>(0, a.begin);
    const int64_t grow_end = std::max<int64_t>(0, a.end);
    const std::optional<int64_t> grow = ir::checked_add(grow_begin, grow_end);
    const std::optional<int64_t> out = grow ? ir::checked_add(kept, *grow) : std::nullopt;
    const std::optional<int64_t> product =
        out ? ir::checked_mul(bound, std::max<int64_t>(*out, 1)) : std::nullopt;
    MF_CHECK(product.has_value() && *product <= ir::kMaxTensorElements, InvalidArgument, "pad: x ",
             ir::shape_to_string(shape), " padded by ", ints_to_string(pads),
             " has more than 2^40 (", ir::kMaxTensorElements,
             ") elements, the largest tensor supported");
    bound = *product;
    a.out = *out;
    const int64_t widest = std::max(grow_begin, grow_end);
    if (widest == 0) continue;
    if (mode == PadMode::kEdge) {
      MF_CHECK(kept >= 1, InvalidArgument, "pad: mode \"edge\" cannot pad axis ", d, " of x ",
               ir::shape_to_string(shape), ": it has no element left to repeat",
               kept < a.n ? " after the negative pads crop it" : "");
    } else if (mode == PadMode::kReflect) {
      MF_CHECK(widest < kept, InvalidArgument, "pad: mode \"reflect\" pads axis ", d, " of x ",
               ir::shape_to_string(shape), " by ", widest, ", which needs an axis of more than ",
               widest, " elements", kept < a.n ? " after the negative pads crop it" : "", ", got ",
               kept, " (a reflection repeats at most size - 1 elements)");
    }
  }
  return axes;
}

// The value attribute must be exact in `dtype`: a constant the kernel stores and the reference
// computes alike.
void check_value(DType dtype, double value) {
  switch (dtype) {
    case DType::kFloat32:
      MF_CHECK(!std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max(),
               InvalidArgument, "pad: value ", value, " is beyond Float32's range");
      return;
    case DType::kFloat64:
      return;
    case DType::kInt32:
    case DType::kInt64: {
      // Int32's range; Int64's values exact as a double (the attribute's type), within 2^53.
      const double low = dtype == DType::kInt32 ? -2147483648.0 : -9007199254740992.0;
      const double high = dtype == DType::kInt32 ? 2147483647.0 : 9007199254740992.0;
      MF_CHECK(value == std::trunc(value) && value >= low && value <= high, InvalidArgument,
               "pad: value ", value, " is not exact in ", ir::dtype_name(dtype), " (an integer",
               dtype == DType::kInt64 ? " within 2^53" : " in range",
               " is needed); give a value of x's type");
      return;
    }
    case DType::kBool:
      MF_CHECK(value == 0.0 || value == 1.0, InvalidArgument, "pad: value ", value,
               " is not a Bool; give 0 or 1");
      return;
  }
}

std::vector<TensorType> infer_pad(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  const std::vector<PadAxis> axes = pad_geometry(x.shape, attrs);
  if (in.size() == 2) {
    MF_CHECK(pad_mode(attrs) == PadMode::kConstant, InvalidArgument,
             "pad: the value input is for mode \"constant\" only, got mode \"",
             echo(ir::attr_string(attrs, "mode", "pad"), 40), "\"");
    MF_CHECK(in[1].dtype == x.dtype, InvalidArgument, "pad: the value input is ",
             ir::dtype_name(in[1].dtype), " but x is ", ir::dtype_name(x.dtype), "; insert a cast");
    MF_CHECK(ir::num_elements(in[1].shape) == 1, InvalidArgument,
             "pad: the value input must hold one element, got shape ",
             ir::shape_to_string(in[1].shape));
  } else if (pad_mode(attrs) == PadMode::kConstant) {
    check_value(x.dtype, ir::attr_float(attrs, "value", "pad"));
  }
  Shape out;
  for (const PadAxis& a : axes) out.push_back(a.out);
  return {{x.dtype, out}};
}

// Output index o along an axis -> x's index, or -1 for the constant.
int64_t source_index(const PadAxis& a, int64_t o, PadMode mode) {
  const int64_t i = o - a.begin;
  if (i >= a.lo && i < a.hi) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < a.lo ? a.lo : a.hi - 1;
    case PadMode::kReflect:
      return i < a.lo ? 2 * a.lo - i : 2 * (a.hi - 1) - i;
  }
  return -1;
}

// Rows of the output (every axis but the last) in [row_begin, row_end): a row whose outer index
// falls in a constant pad is the constant; the others copy their middle from one row of x and map
// the last axis' pads element by element. U is the element's bytes as an unsigned integer.
template <typename U>
void pad_rows(const U* x, U* y, const std::vector<PadAxis>& axes,
              const std::vector<std::vector<int64_t>>& maps, const std::vector<int64_t>& strides,
              U fill, int64_t row_begin, int64_t row_end) {
  const size_t last = axes.size() - 1;
  const PadAxis& inner = axes[last];
  const std::vector<int64_t>& inner_map = maps[last];
  const int64_t width = inner.out;
  const int64_t middle_begin = std::max<int64_t>(inner.begin, 0);
  const int64_t middle_end = middle_begin + (inner.hi - inner.lo);
  for (int64_t r = row_begin; r < row_end; ++r) {
    U* out = y + r * width;
    int64_t offset = 0;
    bool constant_row = false;
    int64_t rest = r;
    for (size_t d = last; d-- > 0;) {
      const int64_t i = maps[d][rest % axes[d].out];
      rest /= axes[d].out;
      if (i < 0) {
        constant_row = true;
        break;
      }
      offset += i * strides[d];
    }
    if (constant_row) {
      std::fill(out, out + width, fill);
      continue;
    }
    const U* row = x + offset;
    for (int64_t o = 0; o < middle_begin; ++o) {
      out[o] = inner_map[o] < 0 ? fill : row[inner_map[o]];
    }
    std::copy(row + inner.lo, row + inner.hi, out + middle_begin);
    for (int64_t o = middle_end; o < width; ++o) {
      out[o] = inner_map[o] < 0 ? fill : row[inner_map[o]];
    }
  }
}

template <typename U>
void pad_typed(const ir::KernelContext& ctx, const std::vector<PadAxis>& axes, PadMode mode,
               U fill) {
  const ir::TensorView& x = ctx.inputs[0];
  const U* src = static_cast<const U*>(x.data);
  U* dst = static_cast<U*>(ctx.outputs[0].data);
  if (axes.empty()) {  // a scalar: nothing to pad
    dst[0] = src[0];
    return;
  }
  std::vector<std::vector<int64_t>> maps(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    maps[d].resize(static_cast<size_t>(axes[d].out));
    for (int64_t o = 0; o < axes[d].out; ++o) maps[d][o] = source_index(axes[d], o, mode);
  }
  const std::vector<int64_t> strides = ir::contiguous_strides(x.type.shape);
  const int64_t width = axes.back().out;
  const int64_t rows = width == 0 ? 0 : ctx.outputs[0].size() / width;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(width, 1));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    pad_rows<U>(src, dst, axes, maps, strides, fill, begin, end);
  });
}

// The constant's bytes in x's dtype (zero bits for the other modes, which never read it).
template <typename U>
U fill_bits(const ir::KernelContext& ctx, PadMode mode) {
  U bits{};
  if (mode != PadMode::kConstant) return bits;
  if (ctx.inputs.size() == 2) {
    std::memcpy(&bits, ctx.inputs[1].data, sizeof(U));
    return bits;
  }
  const double value = ir::attr_float(ctx.attrs, "value", ctx.op_name);
  check_value(ctx.inputs[0].type.dtype, value);  // never an out-of-range conversion
  ir::visit_dtype(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == sizeof(U)) {
      const T v = std::is_same_v<T, bool> ? static_cast<T>(value != 0.0) : static_cast<T>(value);
      std::memcpy(&bits, &v, sizeof(U));
    }
  });
  return bits;
}

void pad_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const std::vector<PadAxis> axes = pad_geometry(x.type.shape, ctx.attrs);
  const PadMode mode = pad_mode(ctx.attrs);
  if (ctx.outputs[0].size() == 0) return;
  switch (ir::dtype_size(x.type.dtype)) {
    case 1:
      return pad_typed<uint8_t>(ctx, axes, mode, fill_bits<uint8_t>(ctx, mode));
    case 4:
      return pad_typed<uint32_t>(ctx, axes, mode, fill_bits<uint32_t>(ctx, mode));
    case 8:
      return pad_typed<uint64_t>(ctx, axes, mode, fill_bits<uint64_t>(ctx, mode));
    default:
      MF_FAIL(Internal, ctx.op_name, ": no kernel for ", ir::dtype_name(x.type.dtype));
  }
}

// The reference crops every axis first, then pads the cropped tensor axis by axis, in the cropped
// axis' own coordinates (numpy's order of work, not the kernel's index maps).
RefTensor ref_remap_axis(const RefTensor& t, size_t axis, int64_t size,
                         const std::function<std::optional<int64_t>(int64_t)>& from,
                         double constant) {
  Shape shape = t.shape;
  shape[axis] = size;
  RefTensor out = ref_tensor(shape);
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    std::vector<int64_t> c = ref_unravel(e, shape);
    const std::optional<int64_t> k = from(c[axis]);
    if (!k) {
      out.values[e] = constant;
      continue;
    }
    c[axis] = *k;
    out.values[e] = t.values[ref_ravel(c, t.shape)];
  }
  return out;
}

std::vector<RefTensor> pad_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const std::vector<int64_t>& pads = std::get<std::vector<int64_t>>(attrs.at("pads"));
  const std::string& mode = std::get<std::string>(attrs.at("mode"));
  const double constant = in.size() == 2 ? in[1].values.at(0) : std::get<double>(attrs.at("value"));
  RefTensor t = in[0];
  const size_t rank = t.shape.size();
  for (size_t d = 0; d < rank; ++d) {  // crop
    const int64_t front = pads[d] < 0 ? -pads[d] : 0;
    const int64_t back = pads[rank + d] < 0 ? -pads[rank + d] : 0;
    const int64_t size = t.shape[d] - front - back;
    t = ref_remap_axis(
        t, d, size, [front](int64_t c) { return std::optional<int64_t>(c + front); }, constant);
  }
  for (size_t d = 0; d < rank; ++d) {  // pad
    const int64_t front = pads[d] > 0 ? pads[d] : 0;
    const int64_t back = pads[rank + d] > 0 ? pads[rank + d] : 0;
    const int64_t n = t.shape[d];
    const auto from = [&](int64_t c) -> std::optional<int64_t> {
      const int64_t k = c - front;
      if (k >= 0 && k < n) return k;
      if (mode == "constant") return std::nullopt;
      if (mode == "edge") return k < 0 ? 0 : n - 1;
      return k < 0 ? -k : 2 * (n - 1) - k;  // reflect
    };
    t = ref_remap_axis(t, d, n + front + back, from, constant);
  }
  return {t};
}

// Backward, undoing the forward's steps in reverse: the padding, then the crops.
//  - A constant pad's cells came from no element of x: its backward is a crop, and the crops' a
//    zero pad, so constant mode is one pad of dout by the negated pads. The value input takes the
//    sum of dout over the padded cells: sum(dout) - sum(dx).
//  - An edge or reflect pad repeats elements: along each padded axis every cell's gradient is
//    added to the element it copies (scatter_elements, its source index computed from range:
//    clamp(c - front, 0, n - 1) for edge, (n - 1) - |n - 1 - |c - front|| for reflect). Then a zero
//    pad undoes the crops.
void pad_backward(ir::GradBuilder& b) {
  const Shape& shape = b.input_type(0).shape;
  const std::vector<PadAxis> axes = pad_geometry(shape, b.attrs());
  const std::vector<int64_t>& pads = ir::attr_ints(b.attrs(), "pads", "pad");
  const size_t rank = shape.size();
  const PadMode mode = pad_mode(b.attrs());
  const ir::GradValue dy = b.dout(0);
  if (mode == PadMode::kConstant) {
    std::vector<int64_t> negated;
    for (int64_t p : pads) negated.push_back(-p);
    const ir::GradValue dx = b.op("pad", {dy}, {{"pads", negated}});
    if (b.wants_grad(0)) b.set_grad(0, dx);
    if (b.num_inputs() == 2 && b.wants_grad(1)) {
      const ir::GradValue rest = b.op("sub", {b.op("reduce_sum", {dy}), b.op("reduce_sum", {dx})});
      b.set_grad(1, reshape_to(b, rest, b.input_type(1).shape));
    }
    return;
  }
  if (!b.wants_grad(0)) return;
  ir::GradValue g = dy;
  Shape current = b.output_type(0).shape;
  const DType index = DType::kInt64;
  auto constant = [&](int64_t v) { return b.scalar(static_cast<double>(v), index); };
  for (size_t d = 0; d < rank; ++d) {
    const PadAxis& a = axes[d];
    const int64_t kept = a.hi - a.lo, front = std::max<int64_t>(0, a.begin);
    if (a.out == kept) continue;
    const ir::GradValue cells =
        b.op("range", {}, {{"limit", static_cast<double>(a.out)}, {"dtype", index}});
    const ir::GradValue shifted = b.op("sub", {cells, constant(front)});
    const ir::GradValue last = constant(kept - 1);
    const ir::GradValue source =
        mode == PadMode::kEdge
            ? b.op("minimum", {b.op("maximum", {shifted, constant(0)}), last})
            : b.op("sub", {last, b.op("abs", {b.op("sub", {last, b.op("abs", {shifted})})})});
    Shape along(rank, 1);
    along[d] = a.out;
    const ir::GradValue where = broadcast_to(b, reshape_to(b, source, along), current);
    current[d] = kept;
    g = b.op("scatter_elements", {b.zeros_like({b.input_type(0).dtype, current}), where, g},
             {{"axis", static_cast<int64_t>(d)}, {"reduction", std::string("add")}});
  }
  std::vector<int64_t> crops(2 * rank);
  for (size_t d = 0; d < rank; ++d) {
    crops[d] = axes[d].lo;
    crops[rank + d] = axes[d].n - axes[d].hi;
  }
  if (std::any_of(crops.begin(), crops.end(), [](int64_t c) { return c != 0; })) {
    g = b.op("pad", {g}, {{"pads", crops}});
  }
  b.set_grad(0, g);
}

ir::Attrs pad_attrs(std::vector<int64_t> pads, std::string mode, double value = 0.0) {
  return {{"pads", std::move(pads)}, {"mode", std::move(mode)}, {"value", value}};
}

const ir::OpRegistration kPad =
    ir::define_op("pad")
        .inputs(1, 2)
        .attr("pads", ir::AttrKind::kInts, std::nullopt,
              "[begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}]; negative entries crop")
        .attr("mode", ir::AttrKind::kString, std::string("constant"),
              "\"constant\", \"edge\" (repeat the border) or \"reflect\" (mirror, border "
              "excluded)")
        .attr("value", ir::AttrKind::kFloat, 0.0,
              "the constant (mode \"constant\"), exact in x's dtype; input 1 overrides it")
        .traits(Trait::kPure)
        .infer(infer_pad)
        .kernel(pad_kernel)
        .reference(pad_reference)
        .samples({
            sample({f32({3, 4})}, pad_attrs({1, 2, 0, 1}, "constant")),
            sample({f32({2, 3, 4})}, pad_attrs({0, 1, 2, 1, 0, 1}, "reflect")),
            sample({f32({2, 5})}, pad_attrs({2, 0, 1, 3}, "edge")),
            // Negative pads: crop one side, pad the other.
            sample({f32({4, 6})}, pad_attrs({-1, 2, 1, -3}, "constant", 3.0)),
            sample({f32({5, 4})}, pad_attrs({-1, 2, 1, -1}, "reflect")),
            sample({f32({3, 4, 5})}, pad_attrs({0, -1, 2, 1, 2, -2}, "edge")),
            // Cropped to nothing, and an empty x padded to a nonempty result.
            sample({f32({3, 4})}, pad_attrs({-1, 0, -2, 0}, "constant")),
            sample({f32({0, 3})}, pad_attrs({1, 1, 0, 0}, "constant", 1.0)),
            sample({f32({2, 0, 3})}, pad_attrs({1, 0, 1, 0, 0, 1}, "edge")),
            sample({f32({})}, pad_attrs({}, "constant")),
            sample({f32({7})}, pad_attrs({2, 3}, "constant", 0.5)),  // Float only: not integral
            sample({f32({1, 2, 4, 5})}, pad_attrs({0, 0, 1, 2, 0, 0, 2, 1}, "reflect")),
            sample({f32({2, 3, 4, 5})}, pad_attrs({0, 1, 0, 1, 1, 0, 3, 2}, "edge")),
            // The constant as an input of x's dtype (ONNX's constant_value when not known).
            sample({f32({3, 4}), f32({})}, pad_attrs({1, 0, 2, 1}, "constant")),
            sample({f32({6, 300})}, pad_attrs({3, -2, 2, 5}, "constant", -1.0)),
        })
        .doc(
            "x padded (or, by negative pads, cropped) along every axis with a constant, its "
            "edge or its reflection (numpy's pad, ONNX's Pad)")
        .backward({}, pad_backward);

}  // namespace
}  // namespace mf::runtime::ops
