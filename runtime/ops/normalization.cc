// softmax and log_softmax {axis}, layer_norm(x, gamma, beta) {begin_norm_axis, epsilon} and
// batch_norm(x, scale, bias, mean, var) {epsilon} for inference. All are composites (fusion may
// expand them into reduce + elementwise ops), but run here as single row-wise kernels.
//
// layer_norm returns y only (not MindSpore's extra mean and rstd outputs, which only training
// needs).

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "runtime/kernels/conv_window.h"
#include "runtime/kernels/expand_util.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/row_math.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

template <typename T>
using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using Block = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ---- softmax / log_softmax ----

std::vector<TensorType> infer_softmax(std::string_view op, std::span<const TensorType> in,
                                      const Attrs& attrs) {
  check_dtype(op, in[0].dtype, kFloatTypes);
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, op, ": x must have rank >= 1, got a scalar");
  const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", op), rank_of(in[0]), op);
  MF_CHECK(in[0].shape[axis] > 0, InvalidArgument, op, ": axis ", axis, " of ",
           ir::shape_to_string(in[0].shape), " is empty; there is nothing to normalize over");
  return {in[0]};
}

// (outer, length, inner) around `axis`.
std::array<int64_t, 3> split_at_axis(const Shape& shape, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return {outer, shape[axis], inner};
}

template <bool Log>
void softmax_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  const auto [outer, length, inner] = split_at_axis(shape, axis);
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.inputs[0].as<T>();
    T* y = ctx.outputs[0].as<T>();
    const int64_t block = length * inner;
    parallel_for(outer, grain_for(block), [&](int64_t begin, int64_t end) {
      std::vector<T> stat(inner);  // per column of a (length, inner) block: max, then the sum
      for (int64_t o = begin; o < end; ++o) {
        const T* in = x + o * block;
        T* out = y + o * block;
        if (inner == 1) {
          const T max = reduce_row_fixed<RowReduction::kMax>(in, length);
          if constexpr (Log) {
            map_row_fixed(
                out, length, [max](const auto& v) { return v - max; }, in);
            const T sum = reduce_row_fixed<RowReduction::kSum>(
                out, length, [](const auto& v) { return v.exp(); });
            const T lse = packet_scalar(sum, [](const auto& v) { return v.log(); });
            map_row_fixed(
                out, length, [lse](const auto& v) { return v - lse; }, out);
          } else {
            map_row_fixed(
                out, length, [max](const auto& v) { return (v - max).exp(); }, in);
            const T sum = reduce_row_fixed<RowReduction::kSum>(out, length);
            map_row_fixed(
                out, length, [sum](const auto& v) { return v / sum; }, out);
          }
          continue;
        }
        // The axis runs down the rows of a (length, inner) block: reduce column-wise, row by row.
        std::copy_n(in, inner, stat.data());
        for (int64_t r = 1; r < length; ++r) {
          map_row_fixed(
              stat.data(), inner, [](const auto& m, const auto& v) { return m.max(v); },
              stat.data(), in + r * inner);
        }
        for (int64_t r = 0; r < length; ++r) {
          map_row_fixed(
              out + r * inner, inner,
              [](const auto& v, const auto& m) {
                if constexpr (Log) {
                  return (v - m).eval();
                } else {
                  return (v - m).exp().eval();
                }
              },
              in + r * inner, stat.data());
        }
        std::fill(stat.begin(), stat.end(), T(0));
        for (int64_t r = 0; r < length; ++r) {
          map_row_fixed(
              stat.data(), inner,
              [](const auto& sum, const auto& v) {
                if constexpr (Log) {
                  return (sum + v.exp()).eval();
                } else {
                  return (sum + v).eval();
                }
              },
              stat.data(), out + r * inner);
        }
        if constexpr (Log) {
          map_row_fixed(
              stat.data(), inner, [](const auto& sum) { return sum.log(); }, stat.data());
        }
        for (int64_t r = 0; r < length; ++r) {
          map_row_fixed(
              out + r * inner, inner,
              [](const auto& v, const auto& s) {
                if constexpr (Log) {
                  return (v - s).eval();
                } else {
                  return (v / s).eval();
                }
              },
              out + r * inner, stat.data());
        }
      }
    });
  });
}

template <bool Log>
std::vector<RefTensor> softmax_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  const auto [outer, length, inner] = split_at_axis(shape, axis);
  RefTensor out = in[0];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t l) { return (o * length + l) * inner + i; };
      double max = -INFINITY;
      for (int64_t l = 0; l < length; ++l) max = std::max(max, in[0].values[at(l)]);
      double sum = 0;
      for (int64_t l = 0; l < length; ++l) sum += std::exp(in[0].values[at(l)] - max);
      for (int64_t l = 0; l < length; ++l) {
        const double shifted = in[0].values[at(l)] - max;
        out.values[at(l)] = Log ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  return {out};
}

std::vector<ir::OpSample> softmax_samples() {
  return {
      sample({f32({3, 5})}),
      sample({f32({7})}),
      sample({f32({2, 3, 4})}, {{"axis", int64_t{1}}}),
      sample({f32({2, 3, 4})}, {{"axis", int64_t{0}}}),
      sample({f32({64, 1000})}, {{"axis", int64_t{-1}}}, -8.0, 8.0),
  };
}

// softmax: reduce_max, sub, exp, reduce_sum, div; log_softmax: reduce_max, sub, exp, reduce_sum,
// log, sub. The kernel rounds step by step as these ops do (row_math.h: the same packet code and
// reduction order whatever the address), so the expansion is bit-exact over the last axis. Over
// another axis the kernel sums column-wise, another order: that expands only when asked by name.
template <bool Log>
std::vector<ir::Value> expand_softmax(ir::Graph& graph, ir::Node& node, bool bit_exact) {
  Expansion e(graph, node);
  const Shape& shape = e.input_type(0).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(e.attrs(), "axis", node.op()), rank, node.op());
  if (bit_exact && axis != rank - 1) return {};
  const ir::Value x = e.input(0);
  const ir::Value max = e.op("reduce_max", {x}, keep_axes({axis}));
  const ir::Value shifted = e.op("sub", {x, max});
  const ir::Value exp = e.op("exp", {shifted});
  const ir::Value sum = e.op("reduce_sum", {exp}, keep_axes({axis}));
  if constexpr (Log) {
    return {e.op("sub", {shifted, e.op("log", {sum})})};
  } else {
    return {e.op("div", {exp, sum})};
  }
}

// Backward, from the output y along the axis: softmax dx = y (dy - sum(dy y)); log_softmax
// dx = dy - exp(y) sum(dy).
template <bool Log>
void softmax_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const std::string_view op = Log ? "log_softmax" : "softmax";
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(b.attrs(), "axis", op), rank_of(b.input_type(0)), op);
  const ir::GradValue y = b.output(0), dy = b.dout(0);
  if constexpr (Log) {
    const ir::GradValue sum = b.op("reduce_sum", {dy}, keep_axes({axis}));
    b.set_grad(0, b.op("sub", {dy, b.op("mul", {b.op("exp", {y}), sum})}));
  } else {
    const ir::GradValue sum = b.op("reduce_sum", {b.op("mul", {dy, y})}, keep_axes({axis}));
    b.set_grad(0, b.op("mul", {y, b.op("sub", {dy, sum})}));
  }
}

const ir::OpRegistration kSoftmax =
    ir::define_op("softmax")
        .arity(1)
        .attr("axis", ir::AttrKind::kInt, int64_t{-1}, "the axis that sums to 1")
        .traits(Trait::kPure | Trait::kComposite)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          return infer_softmax("softmax", in, attrs);
        })
        .kernel(softmax_kernel<false>)
        .expander(expand_softmax<false>)
        .reference(softmax_reference<false>)
        .samples(softmax_samples())
        .doc(
            "exp(x - max) / sum(exp(x - max)) along axis (expands to reduce_max, sub, exp, "
            "reduce_sum, div)")
        .backward({.outputs = 1}, softmax_backward<false>);

const ir::OpRegistration kLogSoftmax =
    ir::define_op("log_softmax")
        .arity(1)
        .attr("axis", ir::AttrKind::kInt, int64_t{-1}, "the axis to normalize along")
        .traits(Trait::kPure | Trait::kComposite)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          return infer_softmax("log_softmax", in, attrs);
        })
        .kernel(softmax_kernel<true>)
        .expander(expand_softmax<true>)
        .reference(softmax_reference<true>)
        .samples(softmax_samples())
        .tolerance(1e-5)
        .doc("x - max - log(sum(exp(x - max))) along axis")
        .backward({.outputs = 1}, softmax_backward<true>);

// ---- layer_norm ----

std::vector<TensorType> infer_layer_norm(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("layer_norm", in[0].dtype, kFloatTypes);
  common_dtype("layer_norm", in);
  MF_CHECK(!in[0].shape.empty(), InvalidArgument,
           "layer_norm: x must have rank >= 1, got a scalar");
  const int64_t begin = ir::normalize_axis(ir::attr_int(attrs, "begin_norm_axis", "layer_norm"),
                                           rank_of(in[0]), "layer_norm");
  const Shape norm(in[0].shape.begin() + begin, in[0].shape.end());
  for (size_t i = 1; i < 3; ++i) {
    MF_CHECK(in[i].shape == norm, InvalidArgument, "layer_norm: ", i == 1 ? "gamma" : "beta",
             " must have the normalized shape ", ir::shape_to_string(norm), " (x ",
             ir::shape_to_string(in[0].shape), " from begin_norm_axis ", begin, "), got ",
             ir::shape_to_string(in[i].shape));
  }
  MF_CHECK(ir::attr_float(attrs, "epsilon", "layer_norm") >= 0, InvalidArgument,
           "layer_norm: epsilon must be >= 0");
  return {in[0]};
}

void layer_norm_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const int64_t begin = ir::normalize_axis(ir::attr_int(ctx.attrs, "begin_norm_axis", ctx.op_name),
                                           shape.size(), ctx.op_name);
  const double epsilon = ir::attr_float(ctx.attrs, "epsilon", ctx.op_name);
  int64_t rows = 1;
  for (int64_t d = 0; d < begin; ++d) rows *= shape[d];
  const int64_t width = rows == 0 ? 0 : ctx.inputs[0].size() / rows;
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.inputs[0].as<T>();
    const T* gamma = ctx.inputs[1].as<T>();
    const T* beta = ctx.inputs[2].as<T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(rows, grain_for(width), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* in = x + r * width;
        T* out = y + r * width;
        // Two passes (mean, then the centred second moment): stable where E[x^2] - E[x]^2 is not.
        // Each step rounds as the expansion's ops do (reduce_mean, sub, mul, reduce_mean, add,
        // sqrt, div, mul, mul, add), so the expanded form is bit-identical.
        const T mean = reduce_row_fixed<RowReduction::kSum>(in, width) / static_cast<T>(width);
        map_row_fixed(
            out, width, [mean](const auto& v) { return v - mean; }, in);
        const T var =
            reduce_row_fixed<RowReduction::kSum>(out, width, [](const auto& v) { return v * v; }) /
            static_cast<T>(width);
        const T rstd = T(1) / packet_scalar(var + static_cast<T>(epsilon),
                                            [](const auto& v) { return v.sqrt(); });
        map_row_fixed(
            out, width,
            [rstd](const auto& v, const auto& g, const auto& b) { return v * rstd * g + b; }, out,
            gamma, beta);
      }
    });
  });
}

std::vector<RefTensor> layer_norm_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t begin = std::get<int64_t>(attrs.at("begin_norm_axis"));
  if (begin < 0) begin += static_cast<int64_t>(shape.size());
  const double epsilon = std::get<double>(attrs.at("epsilon"));
  const int64_t width = ir::num_elements(Shape(shape.begin() + begin, shape.end()));
  RefTensor out = in[0];
  if (width == 0) return {out};  // nothing to normalize: an empty result
  const int64_t rows = ir::num_elements(shape) / width;
  ref_normalize_rows(out.values, rows, width, epsilon);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      out.values[r * width + i] = out.values[r * width + i] * in[1].values[i] + in[2].values[i];
    }
  }
  return {out};
}

// layer_norm as the kernel computes it: mean, centre, mean of squares, 1 / sqrt(var + eps), then
// (d * rstd) * gamma + beta.
// The kernel rounds step by step as these ops do, so the expansion is bit-exact. It still expands
// only when named in --enable_expand_ops: alone, the stitched expansion runs at about half the
// speed of this row kernel (docs/perf-log/modes-and-fusion.md, §3.2), and nothing else joins it.
std::vector<ir::Value> expand_layer_norm(ir::Graph& graph, ir::Node& node, bool bit_exact) {
  if (bit_exact) return {};
  Expansion e(graph, node);
  const DType t = e.input_type(0).dtype;
  const int64_t rank = static_cast<int64_t>(e.input_type(0).shape.size());
  const int64_t begin =
      ir::normalize_axis(ir::attr_int(e.attrs(), "begin_norm_axis", node.op()), rank, node.op());
  std::vector<int64_t> axes;
  for (int64_t d = begin; d < rank; ++d) axes.push_back(d);
  const ir::Value x = e.input(0);
  const ir::Value centred = e.op("sub", {x, e.op("reduce_mean", {x}, keep_axes(axes))});
  const ir::Value var = e.op("reduce_mean", {e.op("mul", {centred, centred})}, keep_axes(axes));
  const double epsilon = ir::attr_float(e.attrs(), "epsilon", node.op());
  const ir::Value rstd =
      e.op("div", {e.scalar(1, t), e.op("sqrt", {e.op("add", {var, e.scalar(epsilon, t)})})});
  const ir::Value scaled = e.op("mul", {e.op("mul", {centred, rstd}), e.input(1)});
  return {e.op("add", {scaled, e.input(2)})};
}

// Backward, recomputing mean and rstd from x (layer_norm returns y only). With xhat = (x - mean)
// rstd over the normalized axes: dgamma = dy xhat and dbeta = dy summed over the rows, and dx from
// g = dy gamma (normalized_input_grad).
void layer_norm_backward(ir::GradBuilder& b) {
  const int64_t rank = rank_of(b.input_type(0));
  const int64_t begin = ir::normalize_axis(ir::attr_int(b.attrs(), "begin_norm_axis", "layer_norm"),
                                           rank, "layer_norm");
  const ir::GradValue dy = b.dout(0);
  if (b.wants_grad(2)) b.set_grad(2, b.reduce_to(dy, b.input_type(2).shape));
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  std::vector<int64_t> axes;
  for (int64_t d = begin; d < rank; ++d) axes.push_back(d);
  const Normalized n =
      normalize(b, b.input(0), axes, ir::attr_float(b.attrs(), "epsilon", "layer_norm"));
  if (b.wants_grad(1)) {
    b.set_grad(1, b.reduce_to(b.op("mul", {dy, n.xhat}), b.input_type(1).shape));
  }
  if (b.wants_grad(0)) {
    b.set_grad(0, normalized_input_grad(b, b.op("mul", {dy, b.input(1)}), n, axes));
  }
}

const ir::OpRegistration kLayerNorm =
    ir::define_op("layer_norm")
        .arity(3)
        .attr("begin_norm_axis", ir::AttrKind::kInt, int64_t{-1},
              "normalize over axes [begin_norm_axis, rank)")
        .attr("epsilon", ir::AttrKind::kFloat, 1e-5, "added to the variance")
        .traits(Trait::kPure | Trait::kComposite)
        .infer(infer_layer_norm)
        .kernel(layer_norm_kernel)
        .expander(expand_layer_norm)
        .reference(layer_norm_reference)
        .samples({
            sample({f32({4, 8}), f32({8}), f32({8})}),
            sample({f32({2, 3, 4}), f32({3, 4}), f32({3, 4})}, {{"begin_norm_axis", int64_t{1}}}),
            sample({f32({5}), f32({5}), f32({5})}),
            sample({f32({16, 256}), f32({256}), f32({256})}, {{"epsilon", 1e-6}}),
        })
        .tolerance(1e-4)
        .doc(
            "(x - mean) / sqrt(var + epsilon) * gamma + beta over the trailing axes; returns y "
            "only")
        .backward({.inputs = 0b011}, layer_norm_backward);

// ---- batch_norm (inference) ----

// The axis of x holding the channels: 1 (N, C, ...), or the last for data_format "NHWC" (the
// channels-last order the format-transform pass keeps between convolutions).
int64_t batch_norm_channel_axis(const Shape& x, const Attrs& attrs) {
  return channels_last("batch_norm", attrs) ? static_cast<int64_t>(x.size()) - 1 : 1;
}

std::vector<TensorType> infer_batch_norm(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("batch_norm", in[0].dtype, kFloatTypes);
  common_dtype("batch_norm", in);
  MF_CHECK(in[0].shape.size() >= 2, InvalidArgument,
           "batch_norm: x must be (N, C, ...) or, channels-last, (N, ..., C) with rank >= 2, got ",
           ir::shape_to_string(in[0].shape));
  const int64_t channels = in[0].shape[batch_norm_channel_axis(in[0].shape, attrs)];
  static constexpr const char* kNames[] = {"x", "scale", "bias", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    MF_CHECK(in[i].shape == Shape{channels}, InvalidArgument, "batch_norm: ", kNames[i],
             " must have shape (", channels, ") for the channels of x ",
             ir::shape_to_string(in[0].shape), ", got ", ir::shape_to_string(in[i].shape));
  }
  MF_CHECK(ir::attr_float(attrs, "epsilon", "batch_norm") >= 0, InvalidArgument,
           "batch_norm: epsilon must be >= 0");
  return {in[0]};
}

void batch_norm_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const double epsilon = ir::attr_float(ctx.attrs, "epsilon", ctx.op_name);
  const bool last = channels_last(ctx.op_name, ctx.attrs);
  const int64_t batch = shape[0], channels = shape[batch_norm_channel_axis(shape, ctx.attrs)];
  const int64_t inner = ir::num_elements(Shape(shape.begin() + 2, shape.end()));
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.inputs[0].as<T>();
    T* y = ctx.outputs[0].as<T>();
    // Fold the four per-channel vectors into one multiply-add per element.
    std::vector<T> mul(channels), add(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const T s =
          ctx.inputs[1].as<T>()[c] / std::sqrt(ctx.inputs[4].as<T>()[c] + static_cast<T>(epsilon));
      mul[c] = s;
      add[c] = ctx.inputs[2].as<T>()[c] - ctx.inputs[3].as<T>()[c] * s;
    }
    if (last) {
      // Channels-last: each row of `channels` values times the per-channel vectors; per element
      // the same x * s + a, rounded the same way (the library builds without FMA contraction).
      const int64_t rows = channels == 0 ? 0 : ir::num_elements(shape) / channels;
      const Eigen::Map<const Array<T>> s(mul.data(), channels), a(add.data(), channels);
      parallel_for(rows, grain_for(channels), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          Eigen::Map<Array<T>>(y + r * channels, channels) =
              Eigen::Map<const Array<T>>(x + r * channels, channels) * s + a;
        }
      });
      return;
    }
    parallel_for(batch * channels, grain_for(inner), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % channels;
        Eigen::Map<Array<T>>(y + p * inner, inner) =
            Eigen::Map<const Array<T>>(x + p * inner, inner) * mul[c] + add[c];
      }
    });
  });
}

// batch_norm as the kernel folds it: per channel s = scale / sqrt(var + eps) and
// a = bias - mean * s, then x * s + a. The kernel's per-channel sqrt is scalar, the expansion's
// vectorised (Eigen fast math rounds it differently), so it expands only when asked.
std::vector<ir::Value> expand_batch_norm(ir::Graph& graph, ir::Node& node, bool bit_exact) {
  if (bit_exact) return {};
  Expansion e(graph, node);
  const DType t = e.input_type(0).dtype;
  const int64_t rank = static_cast<int64_t>(e.input_type(0).shape.size());
  const double epsilon = ir::attr_float(e.attrs(), "epsilon", node.op());
  const ir::Value s =
      e.op("div", {e.input(1), e.op("sqrt", {e.op("add", {e.input(4), e.scalar(epsilon, t)})})});
  const ir::Value a = e.op("sub", {e.input(2), e.op("mul", {e.input(3), s})});
  const int64_t axis = batch_norm_channel_axis(e.input_type(0).shape, e.attrs());
  const ir::Value scaled = e.op("mul", {e.input(0), e.along_axis(s, axis, rank)});
  return {e.op("add", {scaled, e.along_axis(a, axis, rank)})};
}

// Backward of the inference form (mean and var are inputs, not statistics of x): with
// rstd = 1 / sqrt(var + eps) and s = scale rstd per channel, y = (x - mean) s + bias, so
// dx = dy s, dbias = sum dy, dmean = -s sum dy, dscale = rstd sum dy (x - mean) and
// dvar = -scale rstd^3 / 2 sum dy (x - mean), the sums over every axis but the channels'.
void batch_norm_backward(ir::GradBuilder& b) {
  const int64_t rank = rank_of(b.input_type(0));
  const int64_t axis = batch_norm_channel_axis(b.input_type(0).shape, b.attrs());
  const std::vector<int64_t> others = all_axes_but(axis, rank);
  const double epsilon = ir::attr_float(b.attrs(), "epsilon", "batch_norm");
  const ir::GradValue dy = b.dout(0);
  const ir::GradValue rstd = b.op("rsqrt", {b.op("add", {b.input(4), scalar_like(b, epsilon)})});
  const bool wants_sum = b.wants_grad(2) || b.wants_grad(3);
  const ir::GradValue sum_dy = wants_sum ? sum_over(b, dy, others, false) : ir::GradValue{};
  if (b.wants_grad(2)) b.set_grad(2, sum_dy);
  if (b.wants_grad(0) || b.wants_grad(3)) {
    const ir::GradValue s = b.op("mul", {b.input(1), rstd});
    if (b.wants_grad(0)) b.set_grad(0, b.op("mul", {dy, along_axis(b, s, axis, rank)}));
    if (b.wants_grad(3)) b.set_grad(3, b.op("neg", {b.op("mul", {sum_dy, s})}));
  }
  if (!b.wants_grad(1) && !b.wants_grad(4)) return;
  const ir::GradValue centred = b.op("sub", {b.input(0), along_axis(b, b.input(3), axis, rank)});
  const ir::GradValue sum_dyx = sum_over(b, b.op("mul", {dy, centred}), others, false);
  if (b.wants_grad(1)) b.set_grad(1, b.op("mul", {sum_dyx, rstd}));
  if (b.wants_grad(4)) {
    const ir::GradValue cube = b.op("mul", {b.op("mul", {rstd, rstd}), rstd});
    const ir::GradValue factor =
        b.op("mul", {scalar_like(b, -0.5), b.op("mul", {b.input(1), cube})});
    b.set_grad(4, b.op("mul", {sum_dyx, factor}));
  }
}

const ir::OpRegistration kBatchNorm =
    ir::define_op("batch_norm")
        .arity(5)
        .attr("epsilon", ir::AttrKind::kFloat, 1e-5, "added to the variance")
        .attr("data_format", ir::AttrKind::kString, std::string("NCHW"),
              "'NCHW' (channels on axis 1), or 'NHWC' for channels on the last axis")
        .traits(Trait::kPure | Trait::kComposite)
        .infer(infer_batch_norm)
        .kernel(batch_norm_kernel)
        .expander(expand_batch_norm)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const double epsilon = std::get<double>(attrs.at("epsilon"));
          const Shape& shape = in[0].shape;
          const int64_t axis = batch_norm_channel_axis(shape, attrs);
          RefTensor out = in[0];
          for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
            const int64_t c = ref_unravel(i, shape)[axis];
            out.values[i] = (in[0].values[i] - in[3].values[c]) /
                                std::sqrt(in[4].values[c] + epsilon) * in[1].values[c] +
                            in[2].values[c];
          }
          return std::vector<RefTensor>{out};
        })
        .samples({
            // The variance must be positive; drawing every input from (0.1, 2) keeps it so.
            sample({f32({2, 3, 4, 5}), f32({3}), f32({3}), f32({3}), f32({3})}, {}, 0.1, 2.0),
            sample({f32({4, 6}), f32({6}), f32({6}), f32({6}), f32({6})}, {{"epsilon", 1e-3}}, 0.1,
                   2.0),
            // Channels-last (as the format-transform pass leaves it between convolutions), with
            // a row of channels off the vector width and several parallel chunks.
            sample({f32({2, 5, 7, 19}), f32({19}), f32({19}), f32({19}), f32({19})},
                   {{"data_format", std::string("NHWC")}}, 0.1, 2.0),
            sample({f32({1, 64, 40, 24}), f32({24}), f32({24}), f32({24}), f32({24})},
                   {{"data_format", std::string("NHWC")}}, 0.1, 2.0),
        })
        .tolerance(1e-4)
        .doc(
            "inference batch norm of (N, C, ...) x, or channels-last (N, ..., C) with data_format "
            "'NHWC': (x - mean) / sqrt(var + epsilon) * scale + bias")
        .backward({.inputs = 0b11011}, batch_norm_backward);

}  // namespace
}  // namespace mf::runtime::ops
