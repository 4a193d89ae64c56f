// max_pool2d, avg_pool2d (NCHW or NHWC) and global_avg_pool. In float32 the windowed pools run on
// oneDNN primitives, created once per shape and thread count through the primitive cache
// (runtime/dnnl/), except the channels-last max pool, which runs its own kernel
// (runtime/kernels/max_pool_nhwc.cc). In float64 they are direct loops per (image, channel) plane.
// global_avg_pool is a plain reduction per plane.
//
// Padding is [pad_h, pad_w] (both sides) or [top, bottom, left, right]; output sizes round down, as
// in PyTorch and MindSpore's "pad" mode. avg_pool2d divides by the number of elements inside the
// input (padding excluded) unless count_include_pad is true.

#include <Eigen/Core>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/kernels/conv_window.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/max_pool_nhwc.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/window_backward.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;
using dnnl_dims = dnnl::memory::dims;

// ---- pools ----

Window pool_window(std::string_view op, const Shape& x, const Attrs& attrs) {
  const std::vector<int64_t> kernel = pair_attr(op, attrs, "kernel", 1);
  Attrs resolved = attrs;
  if (ir::attr_ints(attrs, "stride", op).empty()) resolved["stride"] = kernel;
  const Window w = make_window(op, x, kernel[0], kernel[1], resolved, false);
  MF_CHECK(w.top < w.kh && w.bottom < w.kh && w.left < w.kw && w.right < w.kw, InvalidArgument, op,
           ": padding ", ints_to_string(ir::attr_ints(attrs, "padding", op)),
           " must be smaller than the kernel ", ints_to_string(kernel),
           " so every window sees the input");
  return w;
}

std::vector<TensorType> infer_pool(std::string_view op, std::span<const TensorType> in,
                                   const Attrs& attrs) {
  check_nchw(op, in[0]);
  const bool last = channels_last(op, attrs);
  const Shape xs = nchw_sizes(in[0].shape, last);
  // As PyTorch: only the batch and the channels may be empty; an empty plane has no window.
  MF_CHECK(xs[2] > 0 && xs[3] > 0, InvalidArgument, op, ": x ", ir::shape_to_string(in[0].shape),
           " has an empty plane (height or width 0); only the batch or channels may be 0");
  const Window w = pool_window(op, xs, attrs);
  return {{in[0].dtype, in_format({xs[0], xs[1], w.oh, w.ow}, last)}};
}

enum class PoolKind { kMax, kAvg };

// One (n, c) plane per work item. `include_pad` matters for kAvg only.
template <typename T, PoolKind Kind>
void pool_typed(const ir::KernelContext& ctx, bool include_pad) {
  const Shape& xs = ctx.inputs[0].type.shape;
  const Window w = pool_window(ctx.op_name, xs, ctx.attrs);
  const int64_t height = xs[2], width = xs[3];
  const T* x = ctx.inputs[0].as<T>();
  T* y = ctx.outputs[0].as<T>();
  const int64_t grain =
      std::max<int64_t>(1, 4096 / std::max<int64_t>(1, w.oh * w.ow * w.kh * w.kw));
  parallel_for(xs[0] * xs[1], grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* src = x + p * height * width;
      T* dst = y + p * w.oh * w.ow;
      for (int64_t oy = 0; oy < w.oh; ++oy) {
        const int64_t y0 = oy * w.sh - w.top;
        const int64_t ylo = std::max<int64_t>(0, y0), yhi = std::min(height, y0 + w.kh);
        for (int64_t ox = 0; ox < w.ow; ++ox) {
          const int64_t x0 = ox * w.sw - w.left;
          const int64_t xlo = std::max<int64_t>(0, x0), xhi = std::min(width, x0 + w.kw);
          T acc = Kind == PoolKind::kMax ? -std::numeric_limits<T>::infinity() : T(0);
          for (int64_t iy = ylo; iy < yhi; ++iy) {
            for (int64_t ix = xlo; ix < xhi; ++ix) {
              if constexpr (Kind == PoolKind::kMax) {
                acc = std::max(acc, src[iy * width + ix]);
              } else {
                acc += src[iy * width + ix];
              }
            }
          }
          if constexpr (Kind == PoolKind::kAvg) {
            // With include_pad, the window is clipped only by the far padded edge, as in PyTorch.
            const int64_t count = include_pad ? (std::min(height + w.bottom, y0 + w.kh) - y0) *
                                                    (std::min(width + w.right, x0 + w.kw) - x0)
                                              : (yhi - ylo) * (xhi - xlo);
            acc /= static_cast<T>(count);
          }
          dst[oy * w.ow + ox] = acc;
        }
      }
    }
  });
}

struct DnnlPool {
  dnnl::pooling_forward primitive;
  dnnl::memory::desc src, dst, scratchpad;
};

// The cached oneDNN pooling primitive for float32 x of shape `xs` (see dnnl_conv2d).
template <PoolKind Kind>
std::shared_ptr<const DnnlPool> dnnl_pool(std::string_view op, const Shape& x, const Attrs& attrs,
                                          int threads) {
  const bool last = channels_last(op, attrs);
  const Shape xs = nchw_sizes(x, last);
  const Window w = pool_window(op, xs, attrs);
  const bool include_pad = Kind == PoolKind::kAvg && ir::attr_bool(attrs, "count_include_pad", op);
  // Windows never reach past the padded edge (output sizes round down), so "include padding"
  // divides by kh * kw everywhere, as oneDNN's pooling_avg_include_padding does.
  const dnnl::algorithm algorithm = Kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                    : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl_rt::PrimitiveKey key(op);
  key.add(std::span<const int64_t>(xs))
      .add({w.kh, w.kw, w.sh, w.sw, w.top, w.bottom, w.left, w.right, include_pad ? 1 : 0,
            last ? 1 : 0, threads});
  return dnnl_rt::primitive_cache().get<DnnlPool>(key, [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    auto pool = std::make_shared<DnnlPool>();
    const tag format = last ? tag::nhwc : tag::nchw;
    pool->src = dnnl::memory::desc(dnnl_dims(xs.begin(), xs.end()), f32, format);
    pool->dst = dnnl::memory::desc({xs[0], xs[1], w.oh, w.ow}, f32, format);
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, pool->src,
                                           pool->dst, {w.sh, w.sw}, {w.kh, w.kw}, {w.top, w.left},
                                           {w.bottom, w.right});
    pool->primitive =
        dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(desc, dnnl_rt::cpu_engine()));
    return std::shared_ptr<const DnnlPool>(pool);
  });
}

// A float32 channels-last max pool runs max_pool_nhwc.cc, not oneDNN: see that file for why.
template <PoolKind Kind>
bool runs_max_pool_nhwc(const Attrs& attrs, std::string_view op) {
  return Kind == PoolKind::kMax && channels_last(op, attrs);
}

template <PoolKind Kind>
void pool_kernel(const ir::KernelContext& ctx) {
  const bool include_pad =
      Kind == PoolKind::kAvg && ir::attr_bool(ctx.attrs, "count_include_pad", ctx.op_name);
  // oneDNN pools float32 only: float64 keeps the direct loops.
  if (ctx.outputs[0].type.dtype == DType::kFloat64) {
    if (channels_last(ctx.op_name, ctx.attrs)) {
      return run_nhwc_as_nchw(ctx, [](const ir::KernelContext& nchw) {
        pool_typed<double, Kind>(
            nchw,
            Kind == PoolKind::kAvg && ir::attr_bool(nchw.attrs, "count_include_pad", nchw.op_name));
      });
    }
    return pool_typed<double, Kind>(ctx, include_pad);
  }
  if (ir::num_elements(ctx.outputs[0].type.shape) == 0) return;
  if (runs_max_pool_nhwc<Kind>(ctx.attrs, ctx.op_name)) {
    const Shape xs = nchw_sizes(ctx.inputs[0].type.shape, true);
    return max_pool2d_nhwc_f32(ctx.inputs[0].as<float>(), ctx.outputs[0].as<float>(),
                               window_geometry(xs, pool_window(ctx.op_name, xs, ctx.attrs)));
  }
  const int threads = dnnl_rt::kernel_threads();
  dnnl_rt::ScopedOmpThreads omp(threads);
  const std::shared_ptr<const DnnlPool> pool =
      dnnl_pool<Kind>(ctx.op_name, ctx.inputs[0].type.shape, ctx.attrs, threads);
  const dnnl::engine& engine = dnnl_rt::cpu_engine();
  dnnl::stream& stream = dnnl_rt::thread_stream();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(pool->src, engine, ctx.inputs[0].data)},
      {DNNL_ARG_DST, dnnl::memory(pool->dst, engine, ctx.outputs[0].data)}};
  if (pool->scratchpad.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(pool->scratchpad, engine,
                              dnnl_rt::thread_scratchpad(pool->scratchpad.get_size())));
  }
  pool->primitive.execute(stream, args);
  stream.wait();
}

template <PoolKind Kind>
dnnl_rt::Prepared prepare_pool(std::string_view op, const dnnl_rt::PrepareRequest& request) {
  if (request.inputs[0].dtype != DType::kFloat32 || runs_max_pool_nhwc<Kind>(request.attrs, op)) {
    return {};
  }
  dnnl_pool<Kind>(op, request.inputs[0].shape, request.attrs, request.threads);
  return {true, nullptr};
}

const dnnl_rt::PreparerRegistration kPrepareMaxPool("max_pool2d",
                                                    [](const dnnl_rt::PrepareRequest& r) {
                                                      return prepare_pool<PoolKind::kMax>(
                                                          "max_pool2d", r);
                                                    });
const dnnl_rt::PreparerRegistration kPrepareAvgPool("avg_pool2d",
                                                    [](const dnnl_rt::PrepareRequest& r) {
                                                      return prepare_pool<PoolKind::kAvg>(
                                                          "avg_pool2d", r);
                                                    });

template <PoolKind Kind>
std::vector<RefTensor> pool_nchw_reference(std::string_view op, std::span<const RefTensor> in,
                                           const Attrs& attrs) {
  const Shape& xs = in[0].shape;
  const Window w = pool_window(op, xs, attrs);
  const bool include_pad = Kind == PoolKind::kAvg && std::get<bool>(attrs.at("count_include_pad"));
  RefTensor out = ref_tensor({xs[0], xs[1], w.oh, w.ow});
  for (int64_t p = 0; p < xs[0] * xs[1]; ++p)
    for (int64_t oy = 0; oy < w.oh; ++oy)
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        double acc = Kind == PoolKind::kMax ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int64_t i = 0; i < w.kh; ++i)
          for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t iy = oy * w.sh - w.top + i, ix = ox * w.sw - w.left + j;
            const bool inside = iy >= 0 && iy < xs[2] && ix >= 0 && ix < xs[3];
            const bool in_padded = iy < xs[2] + w.bottom && ix < xs[3] + w.right;
            if (include_pad ? in_padded : inside) ++count;
            if (!inside) continue;
            const double v = in[0].values[(p * xs[2] + iy) * xs[3] + ix];
            acc = Kind == PoolKind::kMax ? std::max(acc, v) : acc + v;
          }
        out.values[(p * w.oh + oy) * w.ow + ox] = Kind == PoolKind::kMax ? acc : acc / count;
      }
  return {out};
}

template <PoolKind Kind>
std::vector<RefTensor> pool_reference(std::string_view op, std::span<const RefTensor> in,
                                      const Attrs& attrs) {
  if (!channels_last(op, attrs)) return pool_nchw_reference<Kind>(op, in, attrs);
  const RefTensor x = ref_to_nchw(in[0]);
  return {ref_to_nhwc(pool_nchw_reference<Kind>(op, std::span<const RefTensor>(&x, 1), attrs)[0])};
}

ir::Attrs pool_attrs(std::vector<int64_t> kernel, std::vector<int64_t> stride,
                     std::vector<int64_t> padding) {
  return {{"kernel", kernel}, {"stride", stride}, {"padding", padding}};
}

// ---- the pools' gradients ----
//
// max_pool2d_grad(x, dy) and avg_pool2d_grad(dy) {input_size}, NCHW, with the forward's window
// attributes: dx of the pools as ops of their own (kernels: window_backward.h). The average's
// gradient needs only x's spatial size, an attribute, so x can be freed after the forward.

// The forward's window over x (N, C, H, W), checked against dy's sizes.
Window check_pool_grad(std::string_view op, const Shape& x, const Shape& dy, const Attrs& attrs) {
  MF_CHECK(x[2] > 0 && x[3] > 0, InvalidArgument, op, ": x ", ir::shape_to_string(x),
           " has an empty plane (height or width 0); only the batch or channels may be 0");
  const Window w = pool_window(op, x, attrs);
  const Shape y = {x[0], x[1], w.oh, w.ow};
  MF_CHECK(dy == y, InvalidArgument, op, ": dy must have the forward's output shape ",
           ir::shape_to_string(y), ", got ", ir::shape_to_string(dy));
  return w;
}

Shape avg_grad_x(const Shape& dy, const Attrs& attrs) {
  const std::vector<int64_t> size = pair_attr("avg_pool2d_grad", attrs, "input_size", 0);
  return {dy[0], dy[1], size[0], size[1]};
}

std::vector<TensorType> infer_max_pool2d_grad(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "max_pool2d_grad";
  check_nchw(kOp, in[0]);
  check_nchw(kOp, in[1]);
  common_dtype(kOp, in);
  check_pool_grad(kOp, in[0].shape, in[1].shape, attrs);
  return {in[0]};
}

std::vector<TensorType> infer_avg_pool2d_grad(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "avg_pool2d_grad";
  check_nchw(kOp, in[0]);
  const Shape x = avg_grad_x(in[0].shape, attrs);
  check_pool_grad(kOp, x, in[0].shape, attrs);
  return {{in[0].dtype, x}};
}

void max_pool2d_grad_kernel(const ir::KernelContext& ctx) {
  const Shape& x = ctx.inputs[0].type.shape;
  const WindowGeometry g = window_geometry(x, pool_window(ctx.op_name, x, ctx.attrs));
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool2d_backward<T>(g, ctx.inputs[0].as<T>(), ctx.inputs[1].as<T>(), ctx.outputs[0].as<T>());
  });
}

// max_pool2d_select(x, g): per window of max_pool2d over x, g at the cell that window's max kept.
std::vector<TensorType> infer_max_pool2d_select(std::span<const TensorType> in,
                                                const Attrs& attrs) {
  constexpr std::string_view kOp = "max_pool2d_select";
  check_nchw(kOp, in[0]);
  check_nchw(kOp, in[1]);
  common_dtype(kOp, in);
  MF_CHECK(in[0].shape == in[1].shape, InvalidArgument, kOp, ": g must have x's shape ",
           ir::shape_to_string(in[0].shape), ", got ", ir::shape_to_string(in[1].shape));
  const Shape& x = in[0].shape;
  const Window w = pool_window(kOp, x, attrs);
  const Shape y = {x[0], x[1], w.oh, w.ow};
  check_pool_grad(kOp, x, y, attrs);  // as max_pool2d_grad: every window reaches a cell of x
  return {{in[0].dtype, y}};
}

void max_pool2d_select_kernel(const ir::KernelContext& ctx) {
  const Shape& x = ctx.inputs[0].type.shape;
  const WindowGeometry g = window_geometry(x, pool_window(ctx.op_name, x, ctx.attrs));
  visit_float(ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool2d_select<T>(g, ctx.inputs[0].as<T>(), ctx.inputs[1].as<T>(), ctx.outputs[0].as<T>());
  });
}

void avg_pool2d_grad_kernel(const ir::KernelContext& ctx) {
  const Shape& x = ctx.outputs[0].type.shape;
  const Window w = pool_window(ctx.op_name, x, ctx.attrs);
  const bool include_pad = ir::attr_bool(ctx.attrs, "count_include_pad", ctx.op_name);
  visit_float(ctx.outputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_backward<T>(window_geometry(x, w), w.bottom, w.right, include_pad,
                           ctx.inputs[0].as<T>(), ctx.outputs[0].as<T>());
  });
}

// The cell of plane p's window (oy, ox) that the forward's max kept: the first strictly larger than
// all before it, or the window's first cell inside x when none is (-1: the window has none).
int64_t reference_argmax(const Shape& xs, const RefTensor& x, const Window& w, int64_t p,
                         int64_t oy, int64_t ox) {
  int64_t first = -1, kept = -1;
  double best = -INFINITY;
  for (int64_t i = 0; i < w.kh; ++i)
    for (int64_t j = 0; j < w.kw; ++j) {
      const int64_t iy = oy * w.sh - w.top + i, ix = ox * w.sw - w.left + j;
      if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3]) continue;
      const int64_t at = (p * xs[2] + iy) * xs[3] + ix;
      if (first < 0) first = at;
      if (x.values[at] > best) {
        best = x.values[at];
        kept = at;
      }
    }
  return kept >= 0 ? kept : first;
}

// The references: each window of the forward's loop gives its dy to the cell the forward's max
// kept (reference_argmax), or in equal shares to the cells it counted.
template <PoolKind Kind>
RefTensor pool_grad_reference(std::string_view op, const Shape& xs, const RefTensor* x,
                              const RefTensor& dy, const Attrs& attrs) {
  const Window w = pool_window(op, xs, attrs);
  const bool include_pad = Kind == PoolKind::kAvg && std::get<bool>(attrs.at("count_include_pad"));
  RefTensor dx = ref_tensor(xs);
  for (int64_t p = 0; p < xs[0] * xs[1]; ++p)
    for (int64_t oy = 0; oy < w.oh; ++oy)
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const double g = dy.values[(p * w.oh + oy) * w.ow + ox];
        if constexpr (Kind == PoolKind::kMax) {
          const int64_t at = reference_argmax(xs, *x, w, p, oy, ox);
          if (at >= 0) dx.values[at] += g;
          continue;
        }
        std::vector<int64_t> cells;
        int64_t count = 0;
        for (int64_t i = 0; i < w.kh; ++i)
          for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t iy = oy * w.sh - w.top + i, ix = ox * w.sw - w.left + j;
            const bool inside = iy >= 0 && iy < xs[2] && ix >= 0 && ix < xs[3];
            const bool in_padded = iy < xs[2] + w.bottom && ix < xs[3] + w.right;
            if (include_pad ? in_padded : inside) ++count;
            if (inside) cells.push_back((p * xs[2] + iy) * xs[3] + ix);
          }
        for (int64_t at : cells) dx.values[at] += g / count;
      }
  return dx;
}

// max_pool2d_select's reference: g at reference_argmax's cell of each window.
RefTensor max_pool2d_select_reference(const RefTensor& x, const RefTensor& g, const Attrs& attrs) {
  const Window w = pool_window("max_pool2d_select", x.shape, attrs);
  RefTensor y = ref_tensor({x.shape[0], x.shape[1], w.oh, w.ow});
  for (int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p)
    for (int64_t oy = 0; oy < w.oh; ++oy)
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const int64_t at = reference_argmax(x.shape, x, w, p, oy, ox);
        y.values[(p * w.oh + oy) * w.ow + ox] = at >= 0 ? g.values[at] : 0.0;
      }
  return y;
}

// Forward windows of the pools' NCHW samples, as (x, attributes).
std::vector<std::pair<Shape, ir::Attrs>> pool_grad_cases(bool average) {
  std::vector<std::pair<Shape, ir::Attrs>> cases = {
      {{2, 3, 8, 8}, pool_attrs({2, 2}, {}, {0, 0})},
      {{2, 3, 7, 9}, pool_attrs({2, 2}, {2, 2}, {0, 0})},   // a row and a column in no window
      {{1, 2, 6, 37}, pool_attrs({2, 2}, {2, 2}, {0, 0})},  // rows of 18 windows: vectors, a tail
      {{1, 2, 7, 9}, pool_attrs({3, 3}, {2, 2}, {1, 1})},
      {{1, 1, 5, 6}, pool_attrs({2, 3}, {1, 2}, {1, 0, 0, 2})},
      {{2, 3, 10, 7}, pool_attrs({3, 2}, {2, 1}, {1, 2, 0, 1})},
      {{1, 16, 15, 15}, pool_attrs({3, 3}, {2, 2}, {1, 1})},
  };
  if (average) {
    for (size_t i = 1; i < 4; ++i) {
      std::pair<Shape, ir::Attrs> with_pad = cases[i];
      with_pad.second["count_include_pad"] = true;
      cases.push_back(with_pad);
    }
  }
  return cases;
}

Shape pool_output(std::string_view op, const Shape& x, const ir::Attrs& attrs) {
  const Window w = pool_window(op, x, attrs);
  return {x[0], x[1], w.oh, w.ow};
}

// A gradient op of the pools: the forward's window attributes, opaque and pure.
ir::OpBuilder pool_grad_op(std::string name, int arity) {
  ir::OpBuilder b = ir::define_op(std::move(name));
  b.arity(arity)
      .attr("kernel", ir::AttrKind::kInts, std::nullopt, "the forward's kernel")
      .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{}, "the forward's stride")
      .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0}, "the forward's padding")
      .traits(Trait::kOpaque | Trait::kPure);
  return b;
}

const ir::OpRegistration kMaxPool2dGrad =
    pool_grad_op("max_pool2d_grad", 2)
        .infer(infer_max_pool2d_grad)
        .kernel(max_pool2d_grad_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          return std::vector<RefTensor>{pool_grad_reference<PoolKind::kMax>(
              "max_pool2d_grad", in[0].shape, &in[0], in[1], attrs)};
        })
        .samples([] {
          std::vector<ir::OpSample> out;
          for (const auto& [x, attrs] : pool_grad_cases(false)) {
            out.push_back(sample({f32(x), f32(pool_output("max_pool2d", x, attrs))}, attrs));
          }
          return out;
        }())
        .doc(
            "the gradient of max_pool2d's NCHW x: each window's dy added at the element its max "
            "kept (the first largest)")
        // Linear in dy, whose adjoint is max_pool2d_select; piecewise constant in x (no gradient).
        .backward({.inputs = 0b01}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(1)) return;
          b.set_grad(1, b.op("max_pool2d_select", {b.input(0), b.dout(0)}, b.attrs()));
        });

const ir::OpRegistration kMaxPool2dSelect =
    pool_grad_op("max_pool2d_select", 2)
        .infer(infer_max_pool2d_select)
        .kernel(max_pool2d_select_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          return std::vector<RefTensor>{max_pool2d_select_reference(in[0], in[1], attrs)};
        })
        .samples([] {
          std::vector<ir::OpSample> out;
          for (const auto& [x, attrs] : pool_grad_cases(false)) {
            out.push_back(sample({f32(x), f32(x)}, attrs));
          }
          return out;
        }())
        .doc(
            "max_pool2d_grad's adjoint in dy (NCHW x and g of x's shape): per window of max_pool2d "
            "over x, g at the element its max kept (the first largest)")
        // Linear in g, whose adjoint is max_pool2d_grad; piecewise constant in x.
        .backward({.inputs = 0b01}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(1)) return;
          b.set_grad(1, b.op("max_pool2d_grad", {b.input(0), b.dout(0)}, b.attrs()));
        });

const ir::OpRegistration kAvgPool2dGrad =
    pool_grad_op("avg_pool2d_grad", 1)
        .attr("count_include_pad", ir::AttrKind::kBool, false, "the forward's count_include_pad")
        .attr("input_size", ir::AttrKind::kInts, std::nullopt, "the forward's x [H, W]")
        .infer(infer_avg_pool2d_grad)
        .kernel(avg_pool2d_grad_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          return std::vector<RefTensor>{pool_grad_reference<PoolKind::kAvg>(
              "avg_pool2d_grad", avg_grad_x(in[0].shape, attrs), nullptr, in[0], attrs)};
        })
        .samples([] {
          std::vector<ir::OpSample> out;
          for (auto [x, attrs] : pool_grad_cases(true)) {
            const Shape y = pool_output("avg_pool2d", x, attrs);
            attrs["input_size"] = std::vector<int64_t>{x[2], x[3]};
            out.push_back(sample({f32(y)}, attrs));
          }
          return out;
        }())
        .doc(
            "the gradient of avg_pool2d's NCHW x from dy: each window's dy shared equally among "
            "the cells it counted")
        // Linear in dy, the adjoint of avg_pool2d: its backward is avg_pool2d itself.
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          ir::Attrs attrs = b.attrs();
          attrs.erase("input_size");
          b.set_grad(0, b.op("avg_pool2d", {b.dout(0)}, std::move(attrs)));
        });

// Backward of the windowed pools by the gradient ops over NCHW (channels-last operands transposed
// around them).
template <PoolKind Kind>
void pool_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  constexpr std::string_view kOp = Kind == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
  const bool last = channels_last(kOp, b.attrs());
  const auto permute = [&](ir::GradValue v, std::vector<int64_t> perm) {
    return last ? b.op("transpose", {v}, {{"perm", std::move(perm)}}) : v;
  };
  const std::vector<int64_t> to_nchw = {0, 3, 1, 2}, to_nhwc = {0, 2, 3, 1};
  ir::Attrs attrs;
  for (const char* name : {"kernel", "stride", "padding"}) attrs[name] = b.attrs().at(name);
  ir::GradValue dx;
  if constexpr (Kind == PoolKind::kMax) {
    dx =
        b.op("max_pool2d_grad", {permute(b.input(0), to_nchw), permute(b.dout(0), to_nchw)}, attrs);
  } else {
    const Shape x = nchw_sizes(b.input_type(0).shape, last);
    attrs["count_include_pad"] = b.attrs().at("count_include_pad");
    attrs["input_size"] = std::vector<int64_t>{x[2], x[3]};
    dx = b.op("avg_pool2d_grad", {permute(b.dout(0), to_nchw)}, attrs);
  }
  b.set_grad(0, permute(dx, to_nhwc));
}

const ir::OpRegistration kMaxPool2d =
    ir::define_op("max_pool2d")
        .arity(1)
        .attr("kernel", ir::AttrKind::kInts, std::nullopt, "[kernel_h, kernel_w]")
        .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{},
              "[stride_h, stride_w]; [] = kernel")
        .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0},
              "[pad_h, pad_w] or [top, bottom, left, right]; padded cells never win")
        .attr("data_format", ir::AttrKind::kString, std::string("NCHW"),
              "'NCHW', or 'NHWC' for channels-last x and y")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          return infer_pool("max_pool2d", in, attrs);
        })
        .kernel(pool_kernel<PoolKind::kMax>)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          return pool_reference<PoolKind::kMax>("max_pool2d", in, attrs);
        })
        .samples({
            sample({f32({2, 3, 8, 8})}, pool_attrs({2, 2}, {}, {0, 0})),
            sample({f32({1, 2, 7, 9})}, pool_attrs({3, 3}, {2, 2}, {1, 1})),
            sample({f32({1, 1, 5, 6})}, pool_attrs({2, 3}, {1, 2}, {1, 0, 0, 2})),
            // resnet's 3x3/2 max pool with padding 1, odd size.
            sample({f32({1, 16, 15, 15})}, pool_attrs({3, 3}, {2, 2}, {1, 1})),
            // The same, channels last (max_pool_nhwc.cc): channels in whole vectors, then
            // squeezenet's first with channels off the vector width, ceil-mode padding on the far
            // side only, two images.
            sample({f32({1, 15, 15, 16})}, channels_last_attrs(pool_attrs({3, 3}, {2, 2}, {1, 1}))),
            sample({f32({2, 13, 13, 37})},
                   channels_last_attrs(pool_attrs({3, 3}, {2, 2}, {0, 1, 0, 1}))),
            sample({f32({1, 9, 11, 5})},
                   channels_last_attrs(pool_attrs({2, 3}, {1, 2}, {1, 0, 0, 2}))),
            // Channels in whole vectors beyond one group of eight (144 = 8 + 1 blocks) and three
            // blocks: the pixel's blocks pooled side by side.
            sample({f32({1, 7, 7, 144})}, channels_last_attrs(pool_attrs({3, 3}, {2, 2}, {1, 1}))),
            sample({f32({2, 6, 5, 48})}, channels_last_attrs(pool_attrs({2, 2}, {}, {0, 0}))),
        })
        .doc("max over 2-D windows of NCHW x")
        .backward({.inputs = 1}, pool_backward<PoolKind::kMax>);

const ir::OpRegistration kAvgPool2d =
    ir::define_op("avg_pool2d")
        .arity(1)
        .attr("kernel", ir::AttrKind::kInts, std::nullopt, "[kernel_h, kernel_w]")
        .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{},
              "[stride_h, stride_w]; [] = kernel")
        .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0},
              "[pad_h, pad_w] or [top, bottom, left, right]")
        .attr("count_include_pad", ir::AttrKind::kBool, false,
              "divide by the full window (true) or by the cells inside the input (false)")
        .attr("data_format", ir::AttrKind::kString, std::string("NCHW"),
              "'NCHW', or 'NHWC' for channels-last x and y")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer([](std::span<const TensorType> in, const Attrs& attrs) {
          return infer_pool("avg_pool2d", in, attrs);
        })
        .kernel(pool_kernel<PoolKind::kAvg>)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          return pool_reference<PoolKind::kAvg>("avg_pool2d", in, attrs);
        })
        .samples({
            sample({f32({2, 3, 8, 8})}, pool_attrs({2, 2}, {}, {0, 0})),
            sample({f32({1, 2, 7, 9})}, pool_attrs({3, 3}, {2, 2}, {1, 1})),
            [] {
              ir::OpSample s = sample({f32({1, 2, 7, 9})}, pool_attrs({3, 3}, {2, 2}, {1, 1}));
              s.attrs["count_include_pad"] = true;
              return s;
            }(),
            sample({f32({2, 10, 7, 3})},
                   channels_last_attrs(pool_attrs({3, 2}, {2, 1}, {1, 2, 0, 1}))),
            // Asymmetric padding, odd sizes, both counts.
            sample({f32({2, 3, 10, 7})}, pool_attrs({3, 2}, {2, 1}, {1, 2, 0, 1})),
            [] {
              ir::OpSample s =
                  sample({f32({2, 3, 10, 7})}, pool_attrs({3, 2}, {2, 1}, {1, 2, 0, 1}));
              s.attrs["count_include_pad"] = true;
              return s;
            }(),
        })
        .doc("mean over 2-D windows of NCHW x")
        .backward({}, pool_backward<PoolKind::kAvg>);

// ---- global_avg_pool ----

const ir::OpRegistration kGlobalAvgPool =
    ir::define_op("global_avg_pool")
        .arity(1)
        .traits(Trait::kReduce | Trait::kPure)
        .infer([](std::span<const TensorType> in, const Attrs&) {
          check_dtype("global_avg_pool", in[0].dtype, kFloatTypes);
          MF_CHECK(in[0].shape.size() >= 3, InvalidArgument,
                   "global_avg_pool: x must be (N, C, spatial...) with rank >= 3, got ",
                   ir::shape_to_string(in[0].shape));
          // The mean of an empty plane is undefined: only the batch or channels may be 0.
          for (size_t d = 2; d < in[0].shape.size(); ++d) {
            MF_CHECK(in[0].shape[d] > 0, InvalidArgument, "global_avg_pool: x ",
                     ir::shape_to_string(in[0].shape),
                     " has an empty spatial dimension; only the batch or channels may be 0");
          }
          Shape out = in[0].shape;
          std::fill(out.begin() + 2, out.end(), 1);
          return std::vector<TensorType>{{in[0].dtype, out}};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const Shape& xs = ctx.inputs[0].type.shape;
          const int64_t planes = xs[0] * xs[1];
          const int64_t size = ir::num_elements(xs) / std::max<int64_t>(1, planes);
          ir::visit_dtype(ctx.inputs[0].type.dtype, [&](auto tag) {
            using T = decltype(tag);
            if constexpr (std::is_floating_point_v<T>) {
              const T* x = ctx.inputs[0].as<T>();
              T* y = ctx.outputs[0].as<T>();
              const int64_t grain =
                  std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, size));
              parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
                for (int64_t p = begin; p < end; ++p) {
                  y[p] = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x + p * size, size)
                             .sum() /
                         static_cast<T>(size);
                }
              });
            }
          });
        })
        .reference([](std::span<const RefTensor> in, const Attrs&) {
          const Shape& xs = in[0].shape;
          Shape out_shape = xs;
          std::fill(out_shape.begin() + 2, out_shape.end(), 1);
          RefTensor out = ref_tensor(out_shape);
          // Spatial sizes are never 0 (inference); the batch or channels may be.
          int64_t size = 1;
          for (size_t d = 2; d < xs.size(); ++d) size *= xs[d];
          for (int64_t p = 0; p < xs[0] * xs[1]; ++p) {
            double sum = 0;
            for (int64_t i = 0; i < size; ++i) sum += in[0].values[p * size + i];
            out.values[p] = sum / size;
          }
          return std::vector<RefTensor>{out};
        })
        .samples(
            {sample({f32({2, 3, 4, 5})}), sample({f32({1, 4, 7})}), sample({f32({2, 2, 3, 3, 2})})})
        .doc("mean over all spatial dims of (N, C, ...) x, keeping them as size 1: (N, C, 1, 1)")
        // dy shared equally over each plane.
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          const Shape& x = b.input_type(0).shape;
          int64_t size = 1;
          for (size_t d = 2; d < x.size(); ++d) size *= x[d];
          const ir::GradValue share = b.op("mul", {b.dout(0), scalar_like(b, 1.0 / double(size))});
          b.set_grad(0, broadcast_to(b, share, x));
        });

}  // namespace
}  // namespace mf::runtime::ops
