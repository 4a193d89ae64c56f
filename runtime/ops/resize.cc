// resize {out_h, out_w, mode, coordinate_transformation_mode, nearest_mode, scale_h, scale_w}:
// the spatial axes of an NCHW tensor resampled to (out_h, out_w) (ONNX's Resize and Upsample).
// Each output coordinate x_resized maps to x_original in x, per axis, as ONNX's Resize defines it
// (scale is scale_h / scale_w when given, otherwise out / in; length_resized is scale * in when the
// scale is given, which may be fractional, otherwise out):
//   half_pixel:           (x_resized + 0.5) / scale - 0.5
//   pytorch_half_pixel:   length_resized > 1 ? (x_resized + 0.5) / scale - 0.5 : 0
//   align_corners:        length_resized == 1 ? 0 : x_resized * (in - 1) / (length_resized - 1)
//   asymmetric:           x_resized / scale
//   tf_half_pixel_for_nn: (x_resized + 0.5) / scale
// "nearest" takes the element at x_original rounded by nearest_mode (round_prefer_floor,
// round_prefer_ceil, floor, ceil, or simple: floor where scale >= 1 and ceil where scale < 1, as
// ONNX Runtime runs Upsample and Resize-10), clamped into x. "linear" interpolates between the two
// elements around x_original on each axis (bilinear), "cubic" between the four around it (bicubic,
// Keys' kernel with coefficient cubic_coeff_a: -0.75 as ONNX and PyTorch, -0.5 as TensorFlow), an
// index outside x clamped to its edge; with exclude_outside those taps weigh 0 and the others are
// scaled to sum to 1. Float32 and Float64. tf_crop_and_resize is refused.

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

enum class Transform { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelNn };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

enum class Mode { kNearest, kLinear, kCubic };

// The validated attributes of one resize.
struct ResizeSpec {
  int64_t out_h = 0, out_w = 0;
  Mode mode = Mode::kNearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  Transform transform = Transform::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double scale_h = 0, scale_w = 0;  // as given: 0 means out / in
};

Mode parse_mode(const Attrs& attrs) {
  const std::string& mode = ir::attr_string(attrs, "mode", "resize");
  if (mode == "nearest") return Mode::kNearest;
  if (mode == "linear") return Mode::kLinear;
  MF_CHECK(mode == "cubic", InvalidArgument,
           "resize: mode must be \"nearest\", \"linear\" or \"cubic\", got \"", echo(mode, 40),
           "\"");
  return Mode::kCubic;
}

Transform parse_transform(const Attrs& attrs) {
  const std::string& t = ir::attr_string(attrs, "coordinate_transformation_mode", "resize");
  if (t == "half_pixel") return Transform::kHalfPixel;
  if (t == "pytorch_half_pixel") return Transform::kPytorchHalfPixel;
  if (t == "align_corners") return Transform::kAlignCorners;
  if (t == "asymmetric") return Transform::kAsymmetric;
  if (t == "tf_half_pixel_for_nn") return Transform::kTfHalfPixelNn;
  MF_CHECK(t != "tf_crop_and_resize", InvalidArgument,
           "resize: coordinate_transformation_mode \"tf_crop_and_resize\" (a region of interest "
           "with extrapolation) is not supported");
  MF_FAIL(InvalidArgument,
          "resize: coordinate_transformation_mode must be \"half_pixel\", \"pytorch_half_pixel\", "
          "\"align_corners\", \"asymmetric\" or \"tf_half_pixel_for_nn\", got \"",
          echo(t, 40), "\"");
}

Nearest parse_nearest(const Attrs& attrs) {
  const std::string& n = ir::attr_string(attrs, "nearest_mode", "resize");
  if (n == "round_prefer_floor") return Nearest::kRoundPreferFloor;
  if (n == "round_prefer_ceil") return Nearest::kRoundPreferCeil;
  if (n == "floor") return Nearest::kFloor;
  if (n == "ceil") return Nearest::kCeil;
  if (n == "simple") return Nearest::kSimple;
  MF_FAIL(InvalidArgument,
          "resize: nearest_mode must be \"round_prefer_floor\", \"round_prefer_ceil\", \"floor\", "
          "\"ceil\" or \"simple\", got \"",
          echo(n, 40), "\"");
}

double parse_scale(const Attrs& attrs, const char* name) {
  const double s = ir::attr_float(attrs, name, "resize");
  MF_CHECK(std::isfinite(s) && s >= 0.0, InvalidArgument, "resize: ", name,
           " must be > 0 (or 0: ", "out / in), got ", s);
  return s;
}

ResizeSpec resize_spec(const Shape& x, const Attrs& attrs) {
  MF_CHECK(x.size() == 4, InvalidArgument,
           "resize: x must be NCHW (rank 4; axes 2 and 3 are resized), got ",
           ir::shape_to_string(x));
  ResizeSpec spec;
  spec.out_h = ir::attr_int(attrs, "out_h", "resize");
  spec.out_w = ir::attr_int(attrs, "out_w", "resize");
  MF_CHECK(spec.out_h >= 0 && spec.out_w >= 0, InvalidArgument, "resize: out_h and out_w must be ",
           ">= 0, got ", spec.out_h, " and ", spec.out_w);
  spec.mode = parse_mode(attrs);
  spec.cubic_a = ir::attr_float(attrs, "cubic_coeff_a", "resize");
  MF_CHECK(std::isfinite(spec.cubic_a), InvalidArgument, "resize: cubic_coeff_a must be finite");
  spec.exclude_outside = ir::attr_bool(attrs, "exclude_outside", "resize");
  spec.transform = parse_transform(attrs);
  spec.nearest = parse_nearest(attrs);
  spec.scale_h = parse_scale(attrs, "scale_h");
  spec.scale_w = parse_scale(attrs, "scale_w");
  MF_CHECK((x[2] > 0 || spec.out_h == 0) && (x[3] > 0 || spec.out_w == 0), InvalidArgument,
           "resize: x ", ir::shape_to_string(x), " has no elements to sample an output of ",
           spec.out_h, " x ", spec.out_w, " from");
  // The output's element count, zero dimensions counted as 1 (ir/shape.h), checked before use.
  std::optional<int64_t> count = int64_t{1};
  for (int64_t d : {x[0], x[1], spec.out_h, spec.out_w}) {
    count = count ? ir::checked_mul(*count, std::max<int64_t>(d, 1)) : std::nullopt;
  }
  MF_CHECK(count.has_value() && *count <= ir::kMaxTensorElements, InvalidArgument, "resize: x ",
           ir::shape_to_string(x), " resized to ", spec.out_h, " x ", spec.out_w,
           " has more than 2^40 (", ir::kMaxTensorElements,
           ") elements, the largest tensor supported");
  return spec;
}

std::vector<TensorType> infer_resize(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("resize", in[0].dtype, kFloatTypes);
  const ResizeSpec spec = resize_spec(in[0].shape, attrs);
  const Shape& x = in[0].shape;
  return {{in[0].dtype, {x[0], x[1], spec.out_h, spec.out_w}}};
}

// One output axis: for each output index, `count` source indices (clamped into x) and their
// weights, index o's at [o * count, (o + 1) * count). Nearest has one tap of weight 1, linear two,
// cubic four.
struct AxisTaps {
  int count = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
};

// Keys' cubic convolution weights of the taps at distances 1 + r, r, 1 - r, 2 - r (ONNX's).
std::array<double, 4> cubic_weights(double r, double a) {
  const double s = 1 - r;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

// x_original of output index `o` along an axis of `in` elements resized to `out`.
double original_coordinate(Transform t, int64_t o, int64_t in, int64_t out, double given_scale) {
  const double scale = given_scale > 0 ? given_scale : static_cast<double>(out) / in;
  const double length = given_scale > 0 ? given_scale * in : static_cast<double>(out);
  const double x = static_cast<double>(o);
  switch (t) {
    case Transform::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Transform::kPytorchHalfPixel:
      return length > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Transform::kAlignCorners:
      return length == 1 ? 0.0 : x * static_cast<double>(in - 1) / (length - 1);
    case Transform::kAsymmetric:
      return x / scale;
    case Transform::kTfHalfPixelNn:
      return (x + 0.5) / scale;
  }
  return 0.0;
}

AxisTaps axis_taps(const ResizeSpec& spec, int64_t in, int64_t out, double given_scale) {
  AxisTaps taps;
  taps.count = spec.mode == Mode::kCubic ? 4 : spec.mode == Mode::kLinear ? 2 : 1;
  taps.index.resize(static_cast<size_t>(out * taps.count));
  taps.weight.resize(static_cast<size_t>(out * taps.count));
  const double scale = given_scale > 0 ? given_scale : static_cast<double>(out) / in;
  const auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    int64_t* index = taps.index.data() + o * taps.count;
    double* weight = taps.weight.data() + o * taps.count;
    // Beyond [-1, in] every rule gives the same (edge) element: clamped first, so that floor()
    // never meets a value an int64 cannot hold.
    const double xo = std::clamp(original_coordinate(spec.transform, o, in, out, given_scale), -1.0,
                                 static_cast<double>(in));
    const double f = std::floor(xo);
    const int64_t base = static_cast<int64_t>(f);
    const double fraction = xo - f;
    if (spec.mode == Mode::kLinear) {
      index[0] = clamp(base);
      index[1] = clamp(base + 1);
      weight[0] = 1 - fraction;
      weight[1] = fraction;
      continue;
    }
    if (spec.mode == Mode::kCubic) {
      // As ONNX's reference: the taps around x from the left, an integral x the third of them.
      const int64_t left = fraction == 0.0 ? base - 1 : base;
      const std::array<double, 4> w = cubic_weights(fraction == 0.0 ? 1.0 : fraction, spec.cubic_a);
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = left - 1 + k;
        weight[k] = spec.exclude_outside && (i < 0 || i >= in) ? 0.0 : w[size_t(k)];
        index[k] = clamp(i);
        sum += weight[k];
      }
      if (spec.exclude_outside) {
        for (int k = 0; k < 4; ++k) weight[k] /= sum;
      }
      continue;
    }
    bool up = false;  // take base + 1 instead of base
    if (fraction != 0.0) {
      switch (spec.nearest) {
        case Nearest::kRoundPreferFloor:
          up = fraction > 0.5;
          break;
        case Nearest::kRoundPreferCeil:
          up = fraction >= 0.5;
          break;
        case Nearest::kFloor:
          up = false;
          break;
        case Nearest::kCeil:
          up = true;
          break;
        case Nearest::kSimple:
          up = scale < 1.0;
          break;
      }
    }
    index[0] = clamp(up ? base + 1 : base);
    weight[0] = 1.0;
  }
  return taps;
}

// Rows of the output, each a weighted sum of `Rows` input rows sampled at `Cols` taps per column.
template <typename T, int Rows, int Cols>
void resize_rows(const ir::KernelContext& ctx, const ResizeSpec& spec, const AxisTaps& rows,
                 const AxisTaps& cols) {
  const Shape& s = ctx.inputs[0].type.shape;
  const int64_t in_h = s[2], in_w = s[3];
  const T* x = ctx.inputs[0].as<T>();
  T* y = ctx.outputs[0].as<T>();
  const int64_t out_w = spec.out_w;
  const int64_t total_rows = s[0] * s[1] * spec.out_h;
  // Weights in T once, so the inner loop converts nothing.
  std::vector<T> col_weight(cols.weight.begin(), cols.weight.end());
  parallel_for(total_rows, grain_for(out_w * Rows * Cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / spec.out_h, oy = r % spec.out_h;
      const T* src[Rows];
      T wy[Rows];
      for (int i = 0; i < Rows; ++i) {
        src[i] = x + (plane * in_h + rows.index[size_t(oy * Rows + i)]) * in_w;
        wy[i] = static_cast<T>(rows.weight[size_t(oy * Rows + i)]);
      }
      T* out = y + r * out_w;
      for (int64_t ox = 0; ox < out_w; ++ox) {
        const int64_t* c = cols.index.data() + ox * Cols;
        const T* wx = col_weight.data() + ox * Cols;
        T value = 0;
        for (int i = 0; i < Rows; ++i) {
          T along = 0;
          for (int j = 0; j < Cols; ++j) along += wx[j] * src[i][c[j]];
          value += Rows == 1 ? along : wy[i] * along;
        }
        out[ox] = value;
      }
    }
  });
}

template <typename T>
void resize_typed(const ir::KernelContext& ctx, const ResizeSpec& spec) {
  const Shape& s = ctx.inputs[0].type.shape;
  const AxisTaps rows = axis_taps(spec, s[2], spec.out_h, spec.scale_h);
  const AxisTaps cols = axis_taps(spec, s[3], spec.out_w, spec.scale_w);
  switch (spec.mode) {
    case Mode::kNearest:
      return resize_rows<T, 1, 1>(ctx, spec, rows, cols);
    case Mode::kLinear:
      return resize_rows<T, 2, 2>(ctx, spec, rows, cols);
    case Mode::kCubic:
      return resize_rows<T, 4, 4>(ctx, spec, rows, cols);
  }
}

void resize_kernel(const ir::KernelContext& ctx) {
  const ResizeSpec spec = resize_spec(ctx.inputs[0].type.shape, ctx.attrs);
  if (ctx.outputs[0].size() == 0) return;
  switch (ctx.inputs[0].type.dtype) {
    case DType::kFloat32:
      return resize_typed<float>(ctx, spec);
    case DType::kFloat64:
      return resize_typed<double>(ctx, spec);
    default:
      MF_FAIL(Internal, ctx.op_name, ": no kernel for ", ir::dtype_name(ctx.inputs[0].type.dtype));
  }
}

// The reference follows ONNX's own (onnx/reference/ops/op_resize.py): per output element and
// axis, the coordinate's ratio (1 when it is integral), the two coefficients the mode gives it,
// the two neighbours of the edge-padded axis, then the axes combined (W first, then H).
double ref_coordinate(const std::string& t, double x, double in, double out, double given) {
  const double scale = given > 0 ? given : out / in;
  const double length = given > 0 ? given * in : out;
  if (t == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (t == "pytorch_half_pixel") return length > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") return length == 1 ? 0.0 : x * (in - 1) / (length - 1);
  if (t == "asymmetric") return x / scale;
  return (x + 0.5) / scale;  // tf_half_pixel_for_nn
}

struct RefTaps {
  int count = 2;
  int64_t index[4];
  double coeff[4];
};

RefTaps ref_taps(const Attrs& attrs, int64_t o, int64_t in, int64_t out, double given) {
  const std::string& mode = std::get<std::string>(attrs.at("mode"));
  const std::string& nearest = std::get<std::string>(attrs.at("nearest_mode"));
  const double x =
      std::clamp(ref_coordinate(std::get<std::string>(attrs.at("coordinate_transformation_mode")),
                                static_cast<double>(o), static_cast<double>(in),
                                static_cast<double>(out), given),
                 -1.0, static_cast<double>(in));
  const double scale = given > 0 ? given : static_cast<double>(out) / in;
  const bool integral = x == std::floor(x);
  const double ratio = integral ? 1.0 : x - std::floor(x);
  RefTaps taps;
  if (mode == "cubic") {
    // ONNX's get_neighbor: the 4 indexes of the axis padded by 2 on each side nearest to x,
    // ties to the smaller, in order.
    std::vector<int64_t> candidates;
    for (int64_t i = -2; i < in + 2; ++i) candidates.push_back(i);
    std::stable_sort(candidates.begin(), candidates.end(), [x](int64_t a, int64_t b) {
      return std::abs(x - double(a)) < std::abs(x - double(b));
    });
    candidates.resize(4);
    std::sort(candidates.begin(), candidates.end());
    const double a = std::get<double>(attrs.at("cubic_coeff_a"));
    const double r = ratio, s = 1 - ratio;
    const double c[4] = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                         ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
    const bool exclude = std::get<bool>(attrs.at("exclude_outside"));
    double sum = 0;
    taps.count = 4;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = candidates[size_t(k)];
      taps.coeff[k] = exclude && (i < 0 || i >= in) ? 0.0 : c[k];
      taps.index[k] = std::min(std::max<int64_t>(i, 0), in - 1);
      sum += taps.coeff[k];
    }
    if (exclude) {
      for (double& v : taps.coeff) v /= sum;
    }
    return taps;
  }
  // Neighbours: (x - 1, x) for an integral x, (floor, floor + 1) otherwise.
  const int64_t left = integral ? static_cast<int64_t>(x) - 1 : static_cast<int64_t>(std::floor(x));
  for (int k = 0; k < 2; ++k) taps.index[k] = std::min(std::max<int64_t>(left + k, 0), in - 1);
  if (mode == "linear") {
    taps.coeff[0] = 1 - ratio;
    taps.coeff[1] = ratio;
    return taps;
  }
  bool second = true;  // an integral x: coefficients (0, 1)
  if (!integral) {
    if (nearest == "round_prefer_floor") second = ratio > 0.5;
    if (nearest == "round_prefer_ceil") second = ratio >= 0.5;
    if (nearest == "floor") second = false;
    if (nearest == "ceil") second = true;
    if (nearest == "simple") second = scale < 1.0;
  }
  taps.coeff[0] = second ? 0.0 : 1.0;
  taps.coeff[1] = second ? 1.0 : 0.0;
  return taps;
}

std::vector<RefTensor> resize_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& s = in[0].shape;
  const int64_t out_h = std::get<int64_t>(attrs.at("out_h"));
  const int64_t out_w = std::get<int64_t>(attrs.at("out_w"));
  const double scale_h = std::get<double>(attrs.at("scale_h"));
  const double scale_w = std::get<double>(attrs.at("scale_w"));
  const Shape out_shape{s[0], s[1], out_h, out_w};
  RefTensor out = ref_tensor(out_shape);
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    const std::vector<int64_t> c = ref_unravel(e, out_shape);
    const RefTaps ty = ref_taps(attrs, c[2], s[2], out_h, scale_h);
    const RefTaps tx = ref_taps(attrs, c[3], s[3], out_w, scale_w);
    double value = 0.0;
    for (int i = 0; i < ty.count; ++i) {
      double along_w = 0.0;
      for (int j = 0; j < tx.count; ++j) {
        along_w += tx.coeff[j] * in[0].values[ref_ravel({c[0], c[1], ty.index[i], tx.index[j]}, s)];
      }
      value += ty.coeff[i] * along_w;
    }
    out.values[e] = value;
  }
  return {out};
}

ir::Attrs resize_attrs(int64_t out_h, int64_t out_w, std::string mode, std::string transform,
                       std::string nearest = "round_prefer_floor", double scale_h = 0.0,
                       double scale_w = 0.0, double cubic_a = -0.75, bool exclude_outside = false) {
  return {{"cubic_coeff_a", cubic_a},
          {"exclude_outside", exclude_outside},
          {"out_h", out_h},
          {"out_w", out_w},
          {"mode", std::move(mode)},
          {"coordinate_transformation_mode", std::move(transform)},
          {"nearest_mode", std::move(nearest)},
          {"scale_h", scale_h},
          {"scale_w", scale_w}};
}

// Backward. Every mode is linear in x and separable: each plane is resized as Mh x Mw^T, Mh
// (out_h x H) and Mw (out_w x W) holding each output index's taps and weights along its axis. So
// dx = Mh^T dy Mw per plane, and the matrices come from resize itself: resizing the identity of
// H as H images of one column (H, 1, H, 1) to (out_h, 1) gives Mh^T (a one-element axis resizes
// to copies of its element in every mode, taps clamped into it), and likewise for Mw.
ir::GradValue resize_matrix(ir::GradBuilder& b, int64_t axis) {
  const TensorType& x = b.input_type(0);
  const int64_t n = x.shape[axis];
  const ir::GradValue index = b.op("range", {}, {{"limit", double(n)}, {"dtype", x.dtype}});
  const ir::GradValue identity =
      b.op("cast", {b.op("equal", {reshape_to(b, index, {n, 1}), reshape_to(b, index, {1, n})})},
           {{"dtype", x.dtype}});
  ir::Attrs attrs = b.attrs();
  const bool rows = axis == 2;
  attrs[rows ? "out_w" : "out_h"] = int64_t{1};
  attrs[rows ? "scale_w" : "scale_h"] = 0.0;
  const Shape images = rows ? Shape{n, 1, n, 1} : Shape{n, 1, 1, n};
  const ir::GradValue resized = b.op("resize", {reshape_to(b, identity, images)}, attrs);
  const int64_t out = ir::attr_int(b.attrs(), rows ? "out_h" : "out_w", "resize");
  return reshape_to(b, resized, {n, out});
}

void resize_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const ir::GradValue rows = b.op("batch_matmul", {resize_matrix(b, 2), b.dout(0)});
  b.set_grad(0, b.op("batch_matmul", {rows, resize_matrix(b, 3)}, {{"transpose_b", true}}));
}

const ir::OpRegistration kResize =
    ir::define_op("resize")
        .arity(1)
        .attr("out_h", ir::AttrKind::kInt, std::nullopt, "the output's height (axis 2)")
        .attr("out_w", ir::AttrKind::kInt, std::nullopt, "the output's width (axis 3)")
        .attr("mode", ir::AttrKind::kString, std::string("nearest"),
              "\"nearest\", \"linear\" or \"cubic\"")
        .attr("cubic_coeff_a", ir::AttrKind::kFloat, -0.75,
              "the cubic kernel's coefficient (-0.75 as ONNX and PyTorch, -0.5 as TensorFlow)")
        .attr("exclude_outside", ir::AttrKind::kBool, false,
              "cubic: taps outside x weigh 0, the others are scaled to sum to 1")
        .attr("coordinate_transformation_mode", ir::AttrKind::kString, std::string("half_pixel"),
              "\"half_pixel\", \"pytorch_half_pixel\", \"align_corners\", \"asymmetric\" or "
              "\"tf_half_pixel_for_nn\" (ONNX's formulas)")
        .attr("nearest_mode", ir::AttrKind::kString, std::string("round_prefer_floor"),
              "\"round_prefer_floor\", \"round_prefer_ceil\", \"floor\", \"ceil\" or \"simple\" "
              "(floor upsampling, ceil downsampling)")
        .attr("scale_h", ir::AttrKind::kFloat, 0.0,
              "the height's scale in the coordinate transform; 0: out_h / height")
        .attr("scale_w", ir::AttrKind::kFloat, 0.0,
              "the width's scale in the coordinate transform; 0: out_w / width")
        .traits(Trait::kPure)
        .infer(infer_resize)
        .kernel(resize_kernel)
        .reference(resize_reference)
        .samples({
            sample({f32({1, 1, 2, 2})}, resize_attrs(4, 4, "linear", "half_pixel")),
            sample({f32({2, 3, 4, 5})}, resize_attrs(3, 7, "linear", "align_corners")),
            sample({f32({1, 2, 5, 5})}, resize_attrs(3, 1, "linear", "pytorch_half_pixel")),
            sample({f32({2, 2, 3, 4})}, resize_attrs(5, 3, "linear", "asymmetric")),
            // A given scale: fractional lengths (0.6 * 4 = 2.4) as ONNX's scales give them.
            sample({f32({1, 1, 2, 4})},
                   resize_attrs(1, 2, "linear", "align_corners", "round_prefer_floor", 0.6, 0.6)),
            sample({f32({1, 2, 3, 5})},
                   resize_attrs(1, 3, "linear", "half_pixel", "round_prefer_floor", 0.6, 0.6)),
            sample({f32({1, 2, 3, 4})}, resize_attrs(7, 8, "nearest", "half_pixel")),
            sample({f32({1, 1, 4, 4})},
                   resize_attrs(8, 8, "nearest", "asymmetric", "round_prefer_ceil")),
            sample({f32({1, 1, 4, 6})},
                   resize_attrs(3, 2, "nearest", "tf_half_pixel_for_nn", "ceil")),
            sample({f32({2, 1, 4, 4})}, resize_attrs(8, 8, "nearest", "align_corners", "floor")),
            // Upsample and Resize-10: asymmetric with "simple" rounding, up and down.
            sample({f32({1, 1, 2, 2})},
                   resize_attrs(4, 6, "nearest", "asymmetric", "simple", 2.0, 3.0)),
            sample({f32({1, 2, 5, 7})},
                   resize_attrs(2, 4, "nearest", "asymmetric", "simple", 0.5, 0.6)),
            sample({f32({1, 1, 3, 3})}, resize_attrs(3, 3, "nearest", "half_pixel", "floor")),
            sample({f32({2, 3, 4, 5})}, resize_attrs(0, 4, "linear", "half_pixel")),  // empty
            sample({f32({3, 2, 33, 40})}, resize_attrs(65, 17, "linear", "half_pixel")),
            // Bicubic: up and down, every transform, TensorFlow's coefficient with the outside
            // excluded, a given fractional scale, a one-row axis.
            sample({f32({1, 2, 4, 4})}, resize_attrs(8, 7, "cubic", "half_pixel")),
            sample({f32({2, 1, 9, 8})}, resize_attrs(4, 3, "cubic", "align_corners")),
            sample({f32({1, 1, 5, 6})}, resize_attrs(9, 11, "cubic", "asymmetric")),
            sample({f32({1, 3, 6, 5})}, resize_attrs(3, 8, "cubic", "pytorch_half_pixel")),
            sample({f32({1, 1, 4, 4})}, resize_attrs(3, 3, "cubic", "half_pixel",
                                                     "round_prefer_floor", 0.8, 0.8, -0.5, true)),
            sample({f32({1, 2, 1, 7})}, resize_attrs(1, 13, "cubic", "half_pixel")),
        })
        .doc(
            "the height and width of NCHW x resampled to (out_h, out_w), nearest, bilinear or "
            "bicubic (ONNX's Resize)")
        .backward({}, resize_backward);

}  // namespace
}  // namespace mf::runtime::ops
