// conv_transpose2d: the transposed 2-D convolution (PyTorch's ConvTranspose2d, ONNX's
// ConvTranspose, MindSpore's Conv2dTranspose), the gradient of conv2d with respect to its input.
// x is (N, C, H, W), the weight (C, O/groups, kH, kW), the optional bias (O). Each input pixel
// scatters its weighted kernel into the output at stride steps; the output is that full result cut
// by the padding and extended at the end by output_padding:
//   out = (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1 + output_padding.
//
// The kernel is GEMM + col2im, as PyTorch's CPU kernel: per (image, group) one Eigen product
// (O/g * kH * kW) x (C/g) by (C/g) x (H * W) gives every tap's contribution, then each is added at
// its output position. Images and groups run in parallel (they write disjoint output channels).

#include <Eigen/Core>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/kernels/conv_window.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::string_view kOp = "conv_transpose2d";

struct TransposedWindow {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t top = 0, left = 0;
  int64_t oh = 0, ow = 0;
};

// The geometry of x (NCHW) through weight ws (C, O/g, kH, kW), checked: every product bounded.
TransposedWindow transposed_window(const Shape& xs, const Shape& ws, const Attrs& attrs) {
  TransposedWindow w;
  w.kh = ws[2];
  w.kw = ws[3];
  const std::vector<int64_t> stride = pair_attr(kOp, attrs, "stride", 1);
  const std::vector<int64_t> dilation = pair_attr(kOp, attrs, "dilation", 1);
  const std::vector<int64_t> extra = pair_attr(kOp, attrs, "output_padding", 0);
  const std::array<int64_t, 4> pad = padding_attr(kOp, attrs);
  w.sh = stride[0], w.sw = stride[1], w.dh = dilation[0], w.dw = dilation[1];
  w.top = pad[0], w.left = pad[2];
  // As PyTorch: output_padding only reaches positions a stride or a dilation step skipped.
  MF_CHECK(extra[0] < std::max(w.sh, w.dh) && extra[1] < std::max(w.sw, w.dw), InvalidArgument, kOp,
           ": output_padding ", ints_to_string(extra),
           " must be smaller than the stride or the dilation in each dimension");
  const auto size = [&](int64_t in, int64_t s, int64_t d, int64_t k, int64_t begin, int64_t end,
                        int64_t more) {
    MF_CHECK(in >= 1, InvalidArgument, kOp, ": x ", ir::shape_to_string(xs),
             " has an empty plane; a transposed convolution needs at least one pixel");
    const std::optional<int64_t> full = ir::checked_mul(in - 1, s);
    const std::optional<int64_t> span = ir::checked_mul(k - 1, d);
    MF_CHECK(full && span && *full < ir::kMaxTensorElements && *span < ir::kMaxTensorElements,
             InvalidArgument, kOp, ": the output of x ", ir::shape_to_string(xs), " with stride ",
             s, " and kernel ", k, " (dilation ", d, ") exceeds 2^40");
    const int64_t out = *full + *span + 1 + more - begin - end;
    MF_CHECK(out >= 1, InvalidArgument, kOp, ": the padding (", begin, " + ", end,
             ") removes the whole output of x ", ir::shape_to_string(xs), " (", *full + *span + 1,
             " positions)");
    return out;
  };
  w.oh = size(xs[2], w.sh, w.dh, w.kh, pad[0], pad[1], extra[0]);
  w.ow = size(xs[3], w.sw, w.dw, w.kw, pad[2], pad[3], extra[1]);
  return w;
}

std::vector<TensorType> infer_conv_transpose2d(std::span<const TensorType> in, const Attrs& attrs) {
  check_nchw(kOp, in[0]);
  const Shape& xs = in[0].shape;
  const Shape& ws = in[1].shape;
  MF_CHECK(in[1].dtype == in[0].dtype && ws.size() == 4, InvalidArgument, kOp,
           ": the weight must be (C, O/groups, kH, kW) of x's dtype, got ",
           ir::type_to_string(in[1]));
  const int64_t groups = ir::attr_int(attrs, "groups", kOp);
  MF_CHECK(groups >= 1 && xs[1] % groups == 0 && ws[0] == xs[1], InvalidArgument, kOp,
           ": the weight's first dimension must be x's channels (", xs[1],
           ") and groups must divide them; got weight ", ir::shape_to_string(ws), ", groups ",
           groups);
  MF_CHECK(ws[2] >= 1 && ws[3] >= 1, InvalidArgument, kOp, ": the kernel ", ir::shape_to_string(ws),
           " is empty");
  const std::optional<int64_t> out_channels = ir::checked_mul(ws[1], groups);
  MF_CHECK(out_channels && *out_channels <= ir::kMaxTensorElements, InvalidArgument, kOp,
           ": weight ", ir::shape_to_string(ws), " times ", groups, " groups is too many channels");
  if (in.size() == 3) {
    MF_CHECK(in[2].dtype == in[0].dtype && in[2].shape == Shape{*out_channels}, InvalidArgument,
             kOp, ": the bias must be (", *out_channels, ") of x's dtype, got ",
             ir::type_to_string(in[2]));
  }
  const TransposedWindow w = transposed_window(xs, ws, attrs);
  return {TensorType{in[0].dtype, {xs[0], *out_channels, w.oh, w.ow}}};
}

template <typename T>
void conv_transpose2d_typed(const ir::KernelContext& ctx) {
  const Shape& xs = ctx.inputs[0].type.shape;
  const Shape& ws = ctx.inputs[1].type.shape;
  const TransposedWindow win = transposed_window(xs, ws, ctx.attrs);
  const int64_t groups = ir::attr_int(ctx.attrs, "groups", ctx.op_name);
  const int64_t channels = xs[1], height = xs[2], width = xs[3];
  const int64_t cg = channels / groups, og = ws[1], out_channels = og * groups;
  const int64_t taps = og * win.kh * win.kw, plane = height * width, out_plane = win.oh * win.ow;
  const T* x = ctx.inputs[0].as<T>();
  const T* w = ctx.inputs[1].as<T>();
  const T* bias = ctx.inputs.size() == 3 ? ctx.inputs[2].as<T>() : nullptr;
  T* y = ctx.outputs[0].as<T>();
  parallel_for(xs[0] * groups, 1, [&](int64_t begin, int64_t end) {
    RowMatrix<T> cols(taps, plane);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / groups, g = item % groups;
      // cols[(o, i, j), (iy, ix)] = sum over c of w[g*cg + c, o, i, j] * x[n, g*cg + c, iy, ix].
      cols.noalias() =
          Eigen::Map<const RowMatrix<T>>(w + g * cg * taps, cg, taps).transpose() *
          Eigen::Map<const RowMatrix<T>>(x + (n * channels + g * cg) * plane, cg, plane);
      T* yg = y + (n * out_channels + g * og) * out_plane;
      for (int64_t o = 0; o < og; ++o) {
        std::fill(yg + o * out_plane, yg + (o + 1) * out_plane,
                  bias != nullptr ? bias[g * og + o] : T(0));
      }
      for (int64_t o = 0; o < og; ++o) {
        T* yo = yg + o * out_plane;
        for (int64_t i = 0; i < win.kh; ++i) {
          for (int64_t j = 0; j < win.kw; ++j) {
            const T* src = cols.data() + ((o * win.kh + i) * win.kw + j) * plane;
            for (int64_t iy = 0; iy < height; ++iy) {
              const int64_t oy = iy * win.sh - win.top + i * win.dh;
              if (oy < 0 || oy >= win.oh) continue;
              T* row = yo + oy * win.ow;
              for (int64_t ix = 0; ix < width; ++ix) {
                const int64_t ox = ix * win.sw - win.left + j * win.dw;
                if (ox >= 0 && ox < win.ow) row[ox] += src[iy * width + ix];
              }
            }
          }
        }
      }
    }
  });
}

void conv_transpose2d_kernel(const ir::KernelContext& ctx) {
  visit_float(ctx.outputs[0].type.dtype,
              [&](auto tag) { conv_transpose2d_typed<decltype(tag)>(ctx); });
}

// Written as the definition: every input pixel adds its weighted kernel at its output positions.
std::vector<RefTensor> conv_transpose2d_reference(std::span<const RefTensor> in,
                                                  const Attrs& attrs) {
  const Shape& xs = in[0].shape;
  const Shape& ws = in[1].shape;
  const TransposedWindow win = transposed_window(xs, ws, attrs);
  const int64_t groups = std::get<int64_t>(attrs.at("groups"));
  const int64_t cg = xs[1] / groups, og = ws[1];
  RefTensor out = ref_tensor({xs[0], og * groups, win.oh, win.ow});
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t o = 0; o < og * groups; ++o)
      for (int64_t p = 0; p < win.oh * win.ow; ++p)
        out.values[(n * og * groups + o) * win.oh * win.ow + p] =
            in.size() == 3 ? in[2].values[o] : 0.0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t iy = 0; iy < xs[2]; ++iy)
        for (int64_t ix = 0; ix < xs[3]; ++ix) {
          const double v = in[0].values[((n * xs[1] + c) * xs[2] + iy) * xs[3] + ix];
          const int64_t g = c / cg;
          for (int64_t o = 0; o < og; ++o)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t oy = iy * win.sh - win.top + i * win.dh;
                const int64_t ox = ix * win.sw - win.left + j * win.dw;
                if (oy < 0 || oy >= win.oh || ox < 0 || ox >= win.ow) continue;
                out.values[((n * og * groups + g * og + o) * win.oh + oy) * win.ow + ox] +=
                    v * in[1].values[((c * og + o) * ws[2] + i) * ws[3] + j];
              }
        }
  return {out};
}

ir::Attrs transpose_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding,
                          std::vector<int64_t> output_padding, std::vector<int64_t> dilation,
                          int64_t groups) {
  return {{"stride", stride},
          {"padding", padding},
          {"output_padding", output_padding},
          {"dilation", dilation},
          {"groups", groups}};
}

// Backward: a transposed convolution is the adjoint of conv2d with the same weight, so dx is a
// conv2d of dy and dw a conv2d_grad_weight with dy as the image and x as its gradient. dy is first
// padded (or cropped) at the end to the R = (H - 1) stride - top + (k - 1) dilation + 1 rows (and
// columns) the full result spans before the end padding and output_padding, so that convolving it
// with padding (top, 0, left, 0) gives exactly H x W positions.
void conv_transpose2d_backward(ir::GradBuilder& b) {
  const ir::GradValue dy = b.dout(0);
  if (b.num_inputs() == 3 && b.wants_grad(2)) {
    b.set_grad(2, b.op("reduce_sum", {dy}, {{"axes", std::vector<int64_t>{0, 2, 3}}}));
  }
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  const Shape& x = b.input_type(0).shape;
  const Shape& w = b.input_type(1).shape;
  const Shape& y = b.output_type(0).shape;
  const std::array<int64_t, 4> pad = padding_attr(kOp, b.attrs());
  const std::vector<int64_t> stride = pair_attr(kOp, b.attrs(), "stride", 1);
  const std::vector<int64_t> dilation = pair_attr(kOp, b.attrs(), "dilation", 1);
  const int64_t rows = (x[2] - 1) * stride[0] - pad[0] + (w[2] - 1) * dilation[0] + 1;
  const int64_t cols = (x[3] - 1) * stride[1] - pad[2] + (w[3] - 1) * dilation[1] + 1;
  ir::GradValue spanned = dy;
  if (rows != y[2] || cols != y[3]) {
    spanned = b.op("pad", {dy},
                   {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 0, rows - y[2], cols - y[3]}}});
  }
  ir::Attrs attrs = {{"stride", stride},
                     {"padding", std::vector<int64_t>{pad[0], 0, pad[2], 0}},
                     {"dilation", dilation},
                     {"groups", b.attrs().at("groups")}};
  if (b.wants_grad(0)) b.set_grad(0, b.op("conv2d", {spanned, b.input(1)}, attrs));
  if (b.wants_grad(1)) {
    attrs["kernel_size"] = std::vector<int64_t>{w[2], w[3]};
    b.set_grad(1, b.op("conv2d_grad_weight", {spanned, b.input(0)}, attrs));
  }
}

const ir::OpRegistration kConvTranspose2d =
    ir::define_op("conv_transpose2d")
        .inputs(2, 3)
        .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{1, 1}, "[stride_h, stride_w]")
        .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0},
              "[pad_h, pad_w] or [top, bottom, left, right]: cut from the full output")
        .attr("output_padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0},
              "[extra_h, extra_w] added at the end; each below the stride or the dilation")
        .attr("dilation", ir::AttrKind::kInts, std::vector<int64_t>{1, 1},
              "[dilation_h, dilation_w]")
        .attr("groups", ir::AttrKind::kInt, int64_t{1}, "channel groups; divides C")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer(infer_conv_transpose2d)
        .kernel(conv_transpose2d_kernel)
        .reference(conv_transpose2d_reference)
        .samples({
            sample({f32({1, 2, 3, 3}), f32({2, 3, 3, 3})},
                   transpose_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}, 1)),
            // Stride 2 with padding and output_padding, bias (a decoder's upsampling layer).
            sample({f32({2, 4, 5, 4}), f32({4, 3, 4, 4}), f32({3})},
                   transpose_attrs({2, 2}, {1, 1}, {1, 0}, {1, 1}, 1)),
            // Groups, dilation, asymmetric padding, unequal strides.
            sample({f32({1, 6, 4, 5}), f32({6, 2, 3, 2}), f32({6})},
                   transpose_attrs({2, 3}, {1, 0, 2, 1}, {0, 2}, {2, 1}, 3)),
            // Depthwise, 1x1 kernel with stride (the output has holes: bias only there).
            sample({f32({1, 3, 3, 3}), f32({3, 1, 1, 1}), f32({3})},
                   transpose_attrs({2, 2}, {0, 0}, {1, 1}, {1, 1}, 3)),
            // Odd sizes, more channels than one SIMD block.
            sample({f32({1, 19, 7, 6}), f32({19, 9, 3, 3})},
                   transpose_attrs({2, 2}, {1, 1}, {0, 0}, {1, 1}, 1)),
        })
        .tolerance(1e-4)
        .doc(
            "2-D transposed convolution of NCHW x with (C, O/groups, kH, kW) weight, optional "
            "bias")
        .backward({.inputs = 0b011}, conv_transpose2d_backward);

}  // namespace
}  // namespace mf::runtime::ops
