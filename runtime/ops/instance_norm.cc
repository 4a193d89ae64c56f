// Normalizations of (N, C, ...) inputs beside normalization.cc's row-wise ones:
//
// instance_norm(x, scale, bias) {epsilon}: each (n, c) plane normalized by its own mean and
// (biased) variance, then scaled and shifted per channel: (x - mean) / sqrt(var + epsilon) *
// scale[c] + bias[c] (ONNX's InstanceNormalization; torch's instance_norm without running stats).
//
// lrn {size, alpha, beta, bias}: local response normalization across channels (ONNX's LRN, as in
// AlexNet): y = x / (bias + alpha / size * s)^beta, s the sum of x^2 over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] that exist.
//
// Both take Float32 or Float64 x of rank >= 2 (axes after the second are the plane) and compute in
// double: each plane is one task's, in one fixed order, so the bits do not depend on the thread
// count. An empty plane or channel axis gives an empty result; nothing divides by its size then.

#include <algorithm>
#include <cmath>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

void check_nc(std::string_view op, const TensorType& x) {
  check_dtype(op, x.dtype, kFloatTypes);
  MF_CHECK(x.shape.size() >= 2, InvalidArgument, op, ": x must be (N, C, ...) with rank >= 2, got ",
           ir::shape_to_string(x.shape));
}

// The elements of one (n, c) plane: the product of the axes after the second.
int64_t plane_size(const Shape& shape) {
  return ir::num_elements(Shape(shape.begin() + 2, shape.end()));
}

// ---- instance_norm ----

std::vector<TensorType> infer_instance_norm(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "instance_norm";
  check_nc(kOp, in[0]);
  common_dtype(kOp, in);
  const int64_t channels = in[0].shape[1];
  for (size_t i = 1; i < 3; ++i) {
    MF_CHECK(in[i].shape == Shape{channels}, InvalidArgument,
             "instance_norm: ", i == 1 ? "scale" : "bias", " must have shape (", channels,
             ") for the channels of x ", ir::shape_to_string(in[0].shape), ", got ",
             ir::shape_to_string(in[i].shape));
  }
  const double epsilon = ir::attr_float(attrs, "epsilon", kOp);
  MF_CHECK(epsilon >= 0, InvalidArgument, "instance_norm: epsilon must be >= 0, got ", epsilon);
  return {in[0]};
}

void instance_norm_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const double epsilon = ir::attr_float(ctx.attrs, "epsilon", ctx.op_name);
  const int64_t channels = shape[1];
  const int64_t planes = shape[0] * channels;
  const int64_t width = plane_size(shape);
  if (planes == 0 || width == 0) return;
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.inputs[0].as<T>();
    const T* scale = ctx.inputs[1].as<T>();
    const T* bias = ctx.inputs[2].as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(planes, grain_for(width), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const T* in = x + p * width;
        T* out = y + p * width;
        const int64_t c = p % channels;
        // Two passes (mean, then the centred second moment): stable where E[x^2] - E[x]^2 is not.
        double mean = 0;
        for (int64_t i = 0; i < width; ++i) mean += in[i];
        mean /= static_cast<double>(width);
        double var = 0;
        for (int64_t i = 0; i < width; ++i) {
          const double d = in[i] - mean;
          var += d * d;
        }
        var /= static_cast<double>(width);
        const double factor = static_cast<double>(scale[c]) / std::sqrt(var + epsilon);
        const double shift = bias[c];
        for (int64_t i = 0; i < width; ++i) {
          out[i] = static_cast<T>((in[i] - mean) * factor + shift);
        }
      }
    });
  });
}

std::vector<RefTensor> instance_norm_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  const double epsilon = std::get<double>(attrs.at("epsilon"));
  const int64_t width = plane_size(shape);
  const int64_t planes = shape[0] * shape[1];
  RefTensor out = in[0];
  ref_normalize_rows(out.values, planes, width, epsilon);
  for (int64_t p = 0; p < planes && width > 0; ++p) {
    const int64_t c = p % shape[1];
    for (int64_t i = 0; i < width; ++i) {
      out.values[p * width + i] = out.values[p * width + i] * in[1].values[c] + in[2].values[c];
    }
  }
  return {out};
}

// Backward as layer_norm's over each plane, with scale and bias per channel: dscale and dbias sum
// dy xhat and dy over every axis but the channels'.
void instance_norm_backward(ir::GradBuilder& b) {
  const int64_t rank = rank_of(b.input_type(0));
  const ir::GradValue dy = b.dout(0);
  const std::vector<int64_t> others = all_axes_but(1, rank);
  if (b.wants_grad(2)) b.set_grad(2, sum_over(b, dy, others, false));
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  std::vector<int64_t> plane;
  for (int64_t d = 2; d < rank; ++d) plane.push_back(d);
  if (plane.empty()) {
    // Planes of one element normalize to 0: y is the bias alone.
    if (b.wants_grad(1)) b.set_grad(1, b.zeros_like(b.input_type(1)));
    if (b.wants_grad(0)) b.set_grad(0, b.zeros_like(b.input_type(0)));
    return;
  }
  const Normalized n =
      normalize(b, b.input(0), plane, ir::attr_float(b.attrs(), "epsilon", "instance_norm"));
  if (b.wants_grad(1)) b.set_grad(1, sum_over(b, b.op("mul", {dy, n.xhat}), others, false));
  if (b.wants_grad(0)) {
    const ir::GradValue g = b.op("mul", {dy, along_axis(b, b.input(1), 1, rank)});
    b.set_grad(0, normalized_input_grad(b, g, n, plane));
  }
}

const ir::OpRegistration kInstanceNorm =
    ir::define_op("instance_norm")
        .arity(3)
        .attr("epsilon", ir::AttrKind::kFloat, 1e-5, "added to the variance")
        .traits(Trait::kPure)
        .infer(infer_instance_norm)
        .kernel(instance_norm_kernel)
        .reference(instance_norm_reference)
        .samples({
            sample({f32({2, 3, 4, 5}), f32({3}), f32({3})}),
            sample({f32({1, 2, 7}), f32({2}), f32({2})}, {{"epsilon", 1e-3}}),
            sample({f32({3, 4}), f32({4}), f32({4})}),  // planes of one element: y = bias
            sample({f32({1, 3, 2, 2, 2}), f32({3}), f32({3})}),
            sample({f32({2, 8, 64}), f32({8}), f32({8})}),
        })
        .tolerance(1e-4)
        .doc(
            "(x - mean) / sqrt(var + epsilon) * scale[c] + bias[c] over each (n, c) plane of "
            "(N, C, ...) x (ONNX's InstanceNormalization)")
        .backward({.inputs = 0b011}, instance_norm_backward);

// ---- lrn ----

std::vector<TensorType> infer_lrn(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "lrn";
  check_nc(kOp, in[0]);
  const int64_t size = ir::attr_int(attrs, "size", kOp);
  MF_CHECK(size >= 1, InvalidArgument, "lrn: size must be >= 1 (channels in the window), got ",
           size);
  for (const char* name : {"alpha", "beta", "bias"}) {
    const double v = ir::attr_float(attrs, name, kOp);
    MF_CHECK(std::isfinite(v), InvalidArgument, "lrn: ", name, " must be finite, got ", v);
  }
  return {in[0]};
}

struct LrnParams {
  int64_t before = 0, after = 0;  // the window: channels [c - before, c + after]
  double scale = 0, beta = 0, bias = 0;
};

LrnParams lrn_params(const Attrs& attrs, std::string_view op) {
  const int64_t size = ir::attr_int(attrs, "size", op);
  LrnParams p;
  p.before = (size - 1) / 2;      // floor((size - 1) / 2)
  p.after = size - 1 - p.before;  // ceil((size - 1) / 2)
  p.scale = ir::attr_float(attrs, "alpha", op) / static_cast<double>(size);
  p.beta = ir::attr_float(attrs, "beta", op);
  p.bias = ir::attr_float(attrs, "bias", op);
  return p;
}

void lrn_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const LrnParams p = lrn_params(ctx.attrs, ctx.op_name);
  const int64_t channels = shape[1];
  const int64_t planes = shape[0] * channels;
  const int64_t width = plane_size(shape);
  if (planes == 0 || width == 0) return;
  const int64_t window = std::min(channels, p.before + p.after + 1);
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.inputs[0].as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(planes, grain_for(width * window), [&](int64_t begin, int64_t end) {
      std::vector<double> sum(width);
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / channels, c = plane % channels;
        // c - before and c + after stay within int64: before, after < 2^62 and c < 2^40.
        const int64_t first = std::max<int64_t>(0, c - p.before);
        const int64_t last = std::min(channels - 1, c + p.after);
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t q = first; q <= last; ++q) {
          const T* row = x + (n * channels + q) * width;
          for (int64_t i = 0; i < width; ++i) sum[i] += static_cast<double>(row[i]) * row[i];
        }
        const T* in = x + plane * width;
        T* out = y + plane * width;
        for (int64_t i = 0; i < width; ++i) {
          out[i] = static_cast<T>(in[i] / std::pow(p.bias + p.scale * sum[i], p.beta));
        }
      }
    });
  });
}

std::vector<RefTensor> lrn_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  const int64_t size = std::get<int64_t>(attrs.at("size"));
  const double alpha = std::get<double>(attrs.at("alpha"));
  const double beta = std::get<double>(attrs.at("beta"));
  const double bias = std::get<double>(attrs.at("bias"));
  const int64_t channels = shape[1];
  const int64_t width = plane_size(shape);
  RefTensor out = in[0];
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    const int64_t i = e % width;  // a nonempty tensor has nonempty planes
    const int64_t c = e / width % channels;
    const int64_t n = e / width / channels;
    double sum = 0;
    for (int64_t q = 0; q < channels; ++q) {
      // The ONNX window: c - floor((size - 1) / 2) <= q <= c + ceil((size - 1) / 2).
      if (q < c - (size - 1) / 2 || q > c + size / 2) continue;
      const double v = in[0].values[(n * channels + q) * width + i];
      sum += v * v;
    }
    out.values[e] = in[0].values[e] / std::pow(bias + alpha / size * sum, beta);
  }
  return {out};
}

ir::Attrs lrn_attrs(int64_t size, double alpha = 1e-4, double beta = 0.75, double bias = 1.0) {
  return {{"size", size}, {"alpha", alpha}, {"beta", beta}, {"bias", bias}};
}

// Sum over the channel window [c - before, c + after] of v (rank >= 2, channels on axis 1, zeros
// beyond them), as shifted copies of v added up: the copy shifted by k is one pad (cropping k
// channels at one end, adding k zeros at the other). Shifts past every channel are left out.
ir::GradValue window_sum(ir::GradBuilder& b, ir::GradValue v, int64_t before, int64_t after) {
  const Shape& shape = b.type(v).shape;
  const int64_t channels = shape[1], rank = static_cast<int64_t>(shape.size());
  ir::GradValue sum;
  for (int64_t k = -std::min(before, channels - 1); k <= std::min(after, channels - 1); ++k) {
    ir::GradValue shifted = v;
    if (k != 0) {
      std::vector<int64_t> pads(2 * rank, 0);
      pads[1] = -k;
      pads[rank + 1] = k;
      shifted = b.op("pad", {v}, {{"pads", pads}});
    }
    sum = sum ? b.op("add", {sum, shifted}) : shifted;
  }
  return sum;
}

// Backward: with d = bias + scale S(x^2) (S the window sum) and y = x d^-beta,
// dx = dy d^-beta - 2 scale beta x S'(dy x d^-beta / d), where S' sums over the channels whose
// window holds c: the window mirrored.
void lrn_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const LrnParams p = lrn_params(b.attrs(), "lrn");
  const ir::GradValue x = b.input(0), dy = b.dout(0);
  const ir::GradValue sum = window_sum(b, b.op("mul", {x, x}), p.before, p.after);
  const ir::GradValue d =
      b.op("add", {scalar_like(b, p.bias), b.op("mul", {scalar_like(b, p.scale), sum})});
  const ir::GradValue power = b.op("pow", {d, scalar_like(b, -p.beta)});
  const ir::GradValue direct = b.op("mul", {dy, power});
  const ir::GradValue through = b.op("div", {b.op("mul", {b.op("mul", {dy, x}), power}), d});
  const ir::GradValue spread = window_sum(b, through, p.after, p.before);
  const ir::GradValue coupled =
      b.op("mul", {scalar_like(b, -2 * p.scale * p.beta), b.op("mul", {x, spread})});
  b.set_grad(0, b.op("add", {direct, coupled}));
}

// alpha is raised above ONNX's default of 1e-4 in most samples, so that a wrong window shows.
const ir::OpRegistration kLrn =
    ir::define_op("lrn")
        .arity(1)
        .attr("size", ir::AttrKind::kInt, std::nullopt, "channels in the window, >= 1")
        .attr("alpha", ir::AttrKind::kFloat, 1e-4, "scale of the windowed sum of squares")
        .attr("beta", ir::AttrKind::kFloat, 0.75, "the exponent")
        .attr("bias", ir::AttrKind::kFloat, 1.0, "added before the exponent")
        .traits(Trait::kPure)
        .infer(infer_lrn)
        .kernel(lrn_kernel)
        .reference(lrn_reference)
        .samples({
            sample({f32({2, 5, 3, 3})}, lrn_attrs(3)),
            sample({f32({1, 4, 6})}, lrn_attrs(2, 0.5, 0.5, 2.0)),
            sample({f32({3, 7})}, lrn_attrs(5, 0.3, 0.75, 1.0)),
            sample({f32({1, 3, 2, 2})}, lrn_attrs(1, 0.2)),
            sample({f32({1, 3, 4})}, lrn_attrs(9, 0.5, 1.0, 1.0)),  // wider than the channels
        })
        .doc(
            "x / (bias + alpha / size * sum of x^2 over size neighbouring channels)^beta, for "
            "(N, C, ...) x (ONNX's LRN)")
        .backward({.inputs = 1}, lrn_backward);

}  // namespace
}  // namespace mf::runtime::ops
