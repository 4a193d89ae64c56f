// conv2d's gradient ops: conv2d_grad_input(dy, w) -> dx and conv2d_grad_weight(x, dy) -> dw, NCHW,
// with the forward's stride, padding, dilation and groups. conv2d's own backward rule (conv.cc)
// emits them; each one's backward is another of the three products x w -> y.
//
// Two kernels each, chosen per shape and mode, never per run:
// - oneDNN's backward primitives in its blocked layouts, with the plain tensors reordered in and
//   out, where they pay: 2-4x the direct kernels on LeNet5's and ResNet's convolutions (measured
//   with ONEDNN_VERBOSE and benchmarks/train). They split the batch's sum over threads, so their
//   bits depend on the thread count: they run with deterministic=OFF only.
// - the direct kernels (runtime/kernels/window_backward.h): Eigen GEMMs over im2col columns, each
//   task owning whole outputs, the same bits for any thread count. deterministic=ON, float64,
//   empty tensors, and the shapes where oneDNN's blocked kernels lose run these.

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/dnnl/reorders.h"
#include "runtime/kernels/conv_window.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/window_backward.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

// The batch and channels follow from the operands; the forward's spatial size (input_size) or
// kernel size (kernel_size) is an attribute, since a strided convolution maps several input sizes
// to one output size.

ir::OpBuilder conv_grad_op(std::string name) {
  ir::OpBuilder b = ir::define_op(std::move(name));
  b.arity(2)
      .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{1, 1}, "the forward's stride")
      .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0}, "the forward's padding")
      .attr("dilation", ir::AttrKind::kInts, std::vector<int64_t>{1, 1}, "the forward's dilation")
      .attr("groups", ir::AttrKind::kInt, int64_t{1}, "the forward's channel groups")
      .traits(Trait::kOpaque | Trait::kPure)
      .tolerance(1e-4);  // float32 GEMMs and sums against double ones, as conv2d
  return b;
}

// The forward's x (N, C, H, W) and window, checked against dy's sizes.
struct ConvGradShapes {
  Shape x, w;
  Window window;
};

ConvGradShapes check_conv_grad(std::string_view op, const Shape& x, const Shape& w, const Shape& dy,
                               const Attrs& attrs) {
  const int64_t groups = ir::attr_int(attrs, "groups", op);
  MF_CHECK(groups >= 1 && x[1] % groups == 0 && w[0] % groups == 0 && w[1] * groups == x[1],
           InvalidArgument, op, ": groups (", groups, "), the input channels (", x[1],
           ") and the weight ", ir::shape_to_string(w), " disagree");
  const Window window = make_window(op, x, w[2], w[3], attrs, true);
  const Shape y = {x[0], w[0], window.oh, window.ow};
  MF_CHECK(dy == y, InvalidArgument, op, ": dy must have the forward's output shape ",
           ir::shape_to_string(y), ", got ", ir::shape_to_string(dy));
  return {x, w, window};
}

std::vector<TensorType> infer_conv2d_grad_input(std::span<const TensorType> in,
                                                const Attrs& attrs) {
  constexpr std::string_view kOp = "conv2d_grad_input";
  check_nchw(kOp, in[0]);
  common_dtype(kOp, in);
  const Shape& w = in[1].shape;
  MF_CHECK(w.size() == 4, InvalidArgument, kOp,
           ": weight must be (out_channels, in_channels / groups, kh, kw), got ",
           ir::shape_to_string(w));
  const std::vector<int64_t> size = pair_attr(kOp, attrs, "input_size", 0);
  const Shape x = {in[0].shape[0], w[1] * ir::attr_int(attrs, "groups", kOp), size[0], size[1]};
  check_conv_grad(kOp, x, w, in[0].shape, attrs);
  return {{in[0].dtype, x}};
}

std::vector<TensorType> infer_conv2d_grad_weight(std::span<const TensorType> in,
                                                 const Attrs& attrs) {
  constexpr std::string_view kOp = "conv2d_grad_weight";
  check_nchw(kOp, in[0]);
  check_nchw(kOp, in[1]);
  common_dtype(kOp, in);
  const std::vector<int64_t> kernel = pair_attr(kOp, attrs, "kernel_size", 1);
  const int64_t groups = ir::attr_int(attrs, "groups", kOp);
  MF_CHECK(groups >= 1, InvalidArgument, kOp, ": groups must be >= 1, got ", groups);
  const Shape w = {in[1].shape[1], in[0].shape[1] / groups, kernel[0], kernel[1]};
  check_conv_grad(kOp, in[0].shape, w, in[1].shape, attrs);
  return {{in[0].dtype, w}};
}

enum class GradKind { kInput, kWeight };

// Whether oneDNN's blocked backward primitive runs this gradient. Both want float32, no empty
// tensor, a window oneDNN can describe (32-bit sizes) and deterministic=OFF. A 1x1 window is a
// plain GEMM, as fast in the direct kernel without the reorders. For the input's gradient of a
// convolution over fewer than 4 channels per group oneDNN keeps dx in plain nchw, where its
// kernel lost 2.5-5x to its own GEMM path (1 -> 16 channels over 32 x 32, batch 64: 5.5 against
// 2.4 ms; 3 -> 64 over 64 x 64, batch 8: 7.4 against 2.3 ms; two threads); from 4 on it won
// (4 -> 6: 5.7 against 8.3 ms, 6 -> 16 over 14 x 14: 0.67 against 2.0 ms).
bool runs_onednn(GradKind kind, const ir::KernelContext& ctx, const Shape& x, const Shape& w,
                 const Window& win, int64_t groups) {
  if (ctx.deterministic || ctx.outputs[0].type.dtype != DType::kFloat32) return false;
  if (dnnl_rt::conv_layout() == dnnl_rt::ConvLayout::kPlain) return false;
  for (const ir::TensorView* t : {&ctx.inputs[0], &ctx.inputs[1], &ctx.outputs[0]}) {
    if (ir::num_elements(t->type.shape) == 0) return false;
  }
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  const int64_t largest = std::max({x[0], x[1], x[2], x[3], w[0], w[2], w[3], win.sh, win.sw,
                                    win.top, win.bottom, win.left, win.right, win.dh, win.dw});
  if (largest > kMax32) return false;
  if (w[2] == 1 && w[3] == 1) return false;
  if (kind == GradKind::kWeight) return true;
  const bool depthwise = groups > 1 && w[1] == 1 && w[0] == groups;
  return depthwise || w[1] >= 4;
}

// A created backward primitive with the layouts it reads and writes, and the reorders from and to
// the plain tensors (empty where the layouts agree). `a` and `b` are the op's two inputs, in the
// op's order; `out` its output.
struct DnnlConvGrad {
  dnnl::primitive primitive;
  dnnl::memory::desc a, b, out, scratchpad;
  dnnl::memory::desc user_a, user_b, user_out;
  dnnl::reorder a_in, b_in, out_back;
  int arg_a = 0, arg_b = 0, arg_out = 0;
};

std::shared_ptr<const DnnlConvGrad> dnnl_conv_grad(GradKind kind, const Shape& xs, const Shape& ws,
                                                   const Window& win, int64_t groups, int threads) {
  dnnl_rt::PrimitiveKey key(kind == GradKind::kInput ? "conv2d_grad_input" : "conv2d_grad_weight");
  key.add(std::span<const int64_t>(xs))
      .add(std::span<const int64_t>(ws))
      .add({win.sh, win.sw, win.top, win.bottom, win.left, win.right, win.dh, win.dw, groups,
            threads});
  return dnnl_rt::primitive_cache().get<DnnlConvGrad>(key, [&] {
    using tag = dnnl::memory::format_tag;
    using dims = dnnl::memory::dims;
    const auto f32 = dnnl::memory::data_type::f32;
    const dims src_dims(xs.begin(), xs.end());
    const dims dst_dims = {xs[0], ws[0], win.oh, win.ow};
    const dims weight_dims = {groups, ws[0] / groups, ws[1], ws[2], ws[3]};
    const dnnl::memory::desc user_src(src_dims, f32, tag::nchw);
    const dnnl::memory::desc user_dst(dst_dims, f32, tag::nchw);
    const dnnl::memory::desc user_weights(weight_dims, f32, tag::goihw);
    const dnnl::memory::desc src(src_dims, f32, tag::any);
    const dnnl::memory::desc dst(dst_dims, f32, tag::any);
    const dnnl::memory::desc weights(weight_dims, f32, tag::any);
    // oneDNN counts dilation from 0 (1 = one gap); output sizes round down, as here.
    const dims strides = {win.sh, win.sw}, dilates = {win.dh - 1, win.dw - 1};
    const dims pad_l = {win.top, win.left}, pad_r = {win.bottom, win.right};
    const dnnl::engine& engine = dnnl_rt::cpu_engine();
    const dnnl::convolution_forward::primitive_desc hint(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, src, weights, dst,
                                        strides, dilates, pad_l, pad_r),
        engine);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto grad = std::make_shared<DnnlConvGrad>();
    // The op's inputs a, b and its output: as the user gives them, as the primitive wants them,
    // and the primitive's argument for each.
    const auto operands = [&](dnnl::primitive primitive, const auto& pd,
                              std::array<dnnl::memory::desc, 3> user,
                              std::array<dnnl::memory::desc, 3> wanted, std::array<int, 3> arg) {
      grad->primitive = std::move(primitive);
      std::tie(grad->user_a, grad->user_b, grad->user_out) = std::tuple(user[0], user[1], user[2]);
      std::tie(grad->a, grad->b, grad->out) = std::tuple(wanted[0], wanted[1], wanted[2]);
      std::tie(grad->arg_a, grad->arg_b, grad->arg_out) = std::tuple(arg[0], arg[1], arg[2]);
      grad->scratchpad = pd.scratchpad_desc();
    };
    if (kind == GradKind::kInput) {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, weights,
                                                dst, strides, dilates, pad_l, pad_r),
          attr, engine, hint);
      operands(dnnl::convolution_backward_data(pd), pd, {user_dst, user_weights, user_src},
               {pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc()},
               {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC});
    } else {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src,
                                                   weights, dst, strides, dilates, pad_l, pad_r),
          attr, engine, hint);
      operands(dnnl::convolution_backward_weights(pd), pd, {user_src, user_dst, user_weights},
               {pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc()},
               {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS});
    }
    grad->a_in = dnnl_rt::make_reorder(grad->user_a, grad->a);
    grad->b_in = dnnl_rt::make_reorder(grad->user_b, grad->b);
    grad->out_back = dnnl_rt::make_reorder(grad->out, grad->user_out);
    return std::shared_ptr<const DnnlConvGrad>(grad);
  });
}

void run_onednn(GradKind kind, const ir::KernelContext& ctx, const Shape& xs, const Shape& ws,
                const Window& win, int64_t groups) {
  const int threads = dnnl_rt::kernel_threads();
  dnnl_rt::ScopedOmpThreads omp(threads);
  const std::shared_ptr<const DnnlConvGrad> grad =
      dnnl_conv_grad(kind, xs, ws, win, groups, threads);
  const dnnl::engine& engine = dnnl_rt::cpu_engine();
  dnnl::stream& stream = dnnl_rt::thread_stream();
  const dnnl::memory a =
      dnnl_rt::operand_in(grad->a_in, grad->user_a, grad->a, ctx.inputs[0].data, 0, stream);
  const dnnl::memory b =
      dnnl_rt::operand_in(grad->b_in, grad->user_b, grad->b, ctx.inputs[1].data, 1, stream);
  dnnl::memory user_out(grad->user_out, engine, ctx.outputs[0].data);
  dnnl::memory out = grad->out_back ? dnnl::memory(grad->out, engine,
                                                   dnnl_rt::reorder_buffer(2, grad->out.get_size()))
                                    : user_out;
  std::unordered_map<int, dnnl::memory> args = {
      {grad->arg_a, a}, {grad->arg_b, b}, {grad->arg_out, out}};
  if (grad->scratchpad.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(grad->scratchpad, engine,
                              dnnl_rt::thread_scratchpad(grad->scratchpad.get_size())));
  }
  grad->primitive.execute(stream, args);
  if (grad->out_back) grad->out_back.execute(stream, out, user_out);
  stream.wait();
}

// Both gradient ops: the forward's x and weight shapes (one of them the op's output), then
// oneDNN where runs_onednn says so, else the direct kernels (window_backward.h), any float type,
// the same bits for any thread count.
template <GradKind K>
void conv_grad_kernel(const ir::KernelContext& ctx) {
  constexpr bool kInput = K == GradKind::kInput;
  const Shape& x = kInput ? ctx.outputs[0].type.shape : ctx.inputs[0].type.shape;
  const Shape& w = kInput ? ctx.inputs[1].type.shape : ctx.outputs[0].type.shape;
  const Window win = make_window(ctx.op_name, x, w[2], w[3], ctx.attrs, true);
  const int64_t groups = ir::attr_int(ctx.attrs, "groups", ctx.op_name);
  if (runs_onednn(K, ctx, x, w, win, groups)) return run_onednn(K, ctx, x, w, win, groups);
  const WindowGeometry g = window_geometry(x, win);
  visit_float(ctx.outputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* a = ctx.inputs[0].as<T>();
    const T* b = ctx.inputs[1].as<T>();
    if constexpr (kInput) {
      conv2d_backward_data<T>(g, w[0], groups, a, b, ctx.outputs[0].as<T>());
    } else {
      conv2d_backward_weights<T>(g, w[0], groups, a, b, ctx.outputs[0].as<T>());
    }
  });
}

// The references: every product of the forward's loop, added where it came from.
struct ConvTerm {
  int64_t x, w, y;  // flat indices into x, w and y
};

template <typename Fn>
void for_each_conv_term(const Shape& xs, const Shape& ws, const Attrs& attrs, Fn&& fn) {
  const Window win = make_window("conv2d", xs, ws[2], ws[3], attrs, true);
  const int64_t groups = std::get<int64_t>(attrs.at("groups"));
  const int64_t cg = ws[1], og = ws[0] / groups;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t o = 0; o < ws[0]; ++o)
      for (int64_t oy = 0; oy < win.oh; ++oy)
        for (int64_t ox = 0; ox < win.ow; ++ox)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t iy = oy * win.sh - win.top + i * win.dh;
                const int64_t ix = ox * win.sw - win.left + j * win.dw;
                if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3]) continue;
                const int64_t channel = o / og * cg + c;
                fn(ConvTerm{((n * xs[1] + channel) * xs[2] + iy) * xs[3] + ix,
                            ((o * cg + c) * ws[2] + i) * ws[3] + j,
                            ((n * ws[0] + o) * win.oh + oy) * win.ow + ox});
              }
}

std::vector<RefTensor> conv2d_grad_input_reference(std::span<const RefTensor> in,
                                                   const Attrs& attrs) {
  const Shape& ws = in[1].shape;
  const std::vector<int64_t>& size = std::get<std::vector<int64_t>>(attrs.at("input_size"));
  const int64_t groups = std::get<int64_t>(attrs.at("groups"));
  RefTensor dx = ref_tensor({in[0].shape[0], ws[1] * groups, size[0], size[1]});
  for_each_conv_term(dx.shape, ws, attrs, [&](const ConvTerm& t) {
    dx.values[t.x] += in[0].values[t.y] * in[1].values[t.w];
  });
  return {dx};
}

std::vector<RefTensor> conv2d_grad_weight_reference(std::span<const RefTensor> in,
                                                    const Attrs& attrs) {
  const std::vector<int64_t>& kernel = std::get<std::vector<int64_t>>(attrs.at("kernel_size"));
  const int64_t groups = std::get<int64_t>(attrs.at("groups"));
  RefTensor dw = ref_tensor({in[1].shape[1], in[0].shape[1] / groups, kernel[0], kernel[1]});
  for_each_conv_term(in[0].shape, dw.shape, attrs, [&](const ConvTerm& t) {
    dw.values[t.w] += in[0].values[t.x] * in[1].values[t.y];
  });
  return {dw};
}

// Forward geometries of conv2d's samples (x, w, stride, padding, dilation, groups): odd sizes,
// strides that leave input rows unread, asymmetric padding, dilation, groups, depthwise with a
// channel multiplier, and a product large enough for several parallel chunks.
struct ConvCase {
  Shape x, w;
  ir::Attrs attrs;
};

std::vector<ConvCase> conv_grad_cases() {
  return {
      {{1, 2, 5, 5}, {3, 2, 3, 3}, conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)},
      {{2, 3, 8, 8}, {4, 3, 3, 3}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)},
      {{2, 4, 9, 7}, {6, 2, 3, 2}, conv_attrs({2, 1}, {1, 2, 0, 1}, {2, 1}, 2)},
      {{1, 6, 6, 6}, {6, 1, 3, 3}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 6)},
      {{1, 4, 7, 7}, {8, 1, 3, 3}, conv_attrs({1, 1}, {0, 1, 1, 2}, {1, 1}, 4)},
      {{1, 3, 12, 14}, {5, 3, 3, 3}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 1)},
      {{2, 8, 9, 10}, {8, 1, 3, 3}, conv_attrs({2, 1}, {2, 2}, {2, 2}, 8)},
      {{1, 16, 9, 9}, {32, 16, 1, 1}, conv_attrs({2, 2}, {0, 0}, {1, 1}, 1)},
      {{2, 16, 12, 12}, {32, 16, 3, 3}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)},
  };
}

Shape conv_output(const ConvCase& c) {
  const Window win = make_window("conv2d", c.x, c.w[2], c.w[3], c.attrs, true);
  return {c.x[0], c.w[0], win.oh, win.ow};
}

std::vector<ir::OpSample> conv_grad_input_samples() {
  std::vector<ir::OpSample> out;
  for (const ConvCase& c : conv_grad_cases()) {
    ir::Attrs attrs = c.attrs;
    attrs["input_size"] = std::vector<int64_t>{c.x[2], c.x[3]};
    out.push_back(sample({f32(conv_output(c)), f32(c.w)}, attrs));
  }
  return out;
}

std::vector<ir::OpSample> conv_grad_weight_samples() {
  std::vector<ir::OpSample> out;
  for (const ConvCase& c : conv_grad_cases()) {
    ir::Attrs attrs = c.attrs;
    attrs["kernel_size"] = std::vector<int64_t>{c.w[2], c.w[3]};
    out.push_back(sample({f32(c.x), f32(conv_output(c))}, attrs));
  }
  return out;
}

// Both gradient ops are bilinear, built from the same terms x w -> y as conv2d: each one's
// backward is another of the three products (second derivatives of a convolution).

// dx = conv2d_grad_input(dy, w): d(dy) = conv2d(g, w), dw = conv2d_grad_weight(g, dy).
void conv2d_grad_input_backward(ir::GradBuilder& b) {
  const ir::Attrs window = conv_window_attrs(b.attrs());
  const ir::GradValue g = b.dout(0);
  if (b.wants_grad(0)) b.set_grad(0, b.op("conv2d", {g, b.input(1)}, window));
  if (b.wants_grad(1)) {
    ir::Attrs attrs = window;
    const Shape& w = b.input_type(1).shape;
    attrs["kernel_size"] = std::vector<int64_t>{w[2], w[3]};
    b.set_grad(1, b.op("conv2d_grad_weight", {g, b.input(0)}, attrs));
  }
}

// dw = conv2d_grad_weight(x, dy): dx = conv2d_grad_input(dy, g), d(dy) = conv2d(x, g).
void conv2d_grad_weight_backward(ir::GradBuilder& b) {
  const ir::Attrs window = conv_window_attrs(b.attrs());
  const ir::GradValue g = b.dout(0);
  if (b.wants_grad(0)) {
    ir::Attrs attrs = window;
    const Shape& x = b.input_type(0).shape;
    attrs["input_size"] = std::vector<int64_t>{x[2], x[3]};
    b.set_grad(0, b.op("conv2d_grad_input", {b.input(1), g}, attrs));
  }
  if (b.wants_grad(1)) b.set_grad(1, b.op("conv2d", {b.input(0), g}, window));
}

const ir::OpRegistration kConv2dGradInput =
    conv_grad_op("conv2d_grad_input")
        .attr("input_size", ir::AttrKind::kInts, std::nullopt, "the forward's x [H, W]")
        .infer(infer_conv2d_grad_input)
        .kernel(conv_grad_kernel<GradKind::kInput>)
        .reference(conv2d_grad_input_reference)
        .samples(conv_grad_input_samples())
        .doc(
            "the gradient of conv2d's NCHW x from dy (N, O, OH, OW) and weight (O, C / groups, "
            "kh, kw): (N, C, input_size)")
        .backward({.inputs = 0b11}, conv2d_grad_input_backward);

const ir::OpRegistration kConv2dGradWeight =
    conv_grad_op("conv2d_grad_weight")
        .attr("kernel_size", ir::AttrKind::kInts, std::nullopt, "the weight's [kh, kw]")
        .infer(infer_conv2d_grad_weight)
        .kernel(conv_grad_kernel<GradKind::kWeight>)
        .reference(conv2d_grad_weight_reference)
        .samples(conv_grad_weight_samples())
        .doc(
            "the gradient of conv2d's weight from NCHW x (N, C, H, W) and dy (N, O, OH, OW): "
            "(O, C / groups, kernel_size)")
        .backward({.inputs = 0b11}, conv2d_grad_weight_backward);
}  // namespace
}  // namespace mf::runtime::ops
