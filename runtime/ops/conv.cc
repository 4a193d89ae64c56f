// conv2d (NCHW or NHWC; stride, padding, dilation, groups, optional bias, an activation inside
// the kernel). In float32 it runs one of four kernels, chosen per shape: oneDNN's primitive in
// plain or blocked layouts (created once per shape and thread count through the primitive cache,
// runtime/dnnl/), the direct NCHW depthwise kernel (runtime/kernels/depthwise_conv.cc), or the
// packed-weights GEMM for small planes (runtime/kernels/packed_conv.cc). oneDNN has no float64
// convolution: in float64 each (image, group) is im2col + a plain product in index order.
//
// data_format "NHWC" (channels last: x, y as (N, H, W, C); weights stay OIHW) is what the
// format-transform pass (passes/format_transform.cc) gives float32 convolutions so that a chain of
// them passes activations in oneDNN's channels-last layout with no reorder between them.
//
// An activation may follow the convolution inside the same kernel (conv-epilogue-fusion, fusion
// opt_level 1: passes/fusion/conv_epilogue_fusion.cc): `activation` "relu" (max(y, 0)) or "clip"
// (min(max(y, clip_min), clip_max), ReLU6 being clip 0..6). In float32 it is a oneDNN eltwise
// post-op applied while each output block is in cache; relu and clip are exact, so the result has
// the bits of the separate ops. "silu", "sigmoid", "hardswish" and "hardsigmoid" (fused only with
// deterministic=OFF) run in oneDNN's math as post-ops, within a stated bound of the separate ops.
//
// Padding is [pad_h, pad_w] (both sides) or [top, bottom, left, right]; output sizes round down, as
// in PyTorch and MindSpore's "pad" mode.

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/dnnl/reorders.h"
#include "runtime/kernels/conv_layout.h"
#include "runtime/kernels/conv_window.h"
#include "runtime/kernels/depthwise_conv.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/packed_conv.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/window_backward.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

// Output planes from this many positions up run conv2d in oneDNN's blocked layouts (see DnnlConv).
constexpr int64_t kBlockedMinOutputPlane = 14 * 14;

// ---- conv2d ----

// The activation that follows the convolution inside the kernel (see the file comment).
struct ConvActivation {
  // kNone..kClip are exact (the bits of the separate ops). The rest are the activations networks
  // put after convolutions (EfficientNet's SiLU, MobileNetV3's hardswish and squeeze-excitation
  // sigmoid), fused only with deterministic=OFF: in float32 they run as oneDNN's eltwise post-op,
  // in its math, within the bound tests/runtime/conv_library_epilogue_test.cc states; where no
  // post-op runs, as the separate ops' own math after the convolution.
  enum class Kind { kNone, kRelu, kClip, kSilu, kSigmoid, kHardswish, kHardsigmoid };
  Kind kind = Kind::kNone;
  double lo = 0, hi = 0;  // kClip's bounds

  bool exact() const { return kind == Kind::kNone || kind == Kind::kRelu || kind == Kind::kClip; }

  // As the separate ops compute it: relu is std::max(y, 0) (Eigen's pmax), clip is maximum then
  // minimum. (The other kinds go through the ops' tile math: apply_activation.)
  template <typename T>
  T apply(T v) const {
    if (kind == Kind::kRelu) return std::max(v, T(0));
    if (kind == Kind::kClip) return std::min(std::max(v, T(lo)), T(hi));
    return v;
  }
};

ConvActivation conv_activation(const Attrs& attrs) {
  ConvActivation a;
  const std::string& name = ir::attr_string(attrs, "activation", "conv2d");
  using Kind = ConvActivation::Kind;
  static constexpr std::pair<std::string_view, Kind> kLibrary[] = {
      {"silu", Kind::kSilu},
      {"sigmoid", Kind::kSigmoid},
      {"hardswish", Kind::kHardswish},
      {"hardsigmoid", Kind::kHardsigmoid}};
  if (name == "relu") {
    a.kind = Kind::kRelu;
  } else if (name == "clip") {
    a.kind = Kind::kClip;
    a.lo = ir::attr_float(attrs, "clip_min", "conv2d");
    a.hi = ir::attr_float(attrs, "clip_max", "conv2d");
    // Also false for a NaN bound.
    MF_CHECK(a.lo <= a.hi, InvalidArgument,
             "conv2d: activation 'clip' needs clip_min <= clip_max, got ", a.lo, " and ", a.hi);
  } else if (name != "none") {
    for (const auto& [library_name, kind] : kLibrary) {
      if (name == library_name) a.kind = kind;
    }
    MF_CHECK(a.kind != Kind::kNone, InvalidArgument,
             "conv2d: activation must be 'none', 'relu', 'clip', 'silu', 'sigmoid', 'hardswish' or "
             "'hardsigmoid', got '",
             echo(name), "'");
  }
  return a;
}

// y = op(inputs) over n elements through the registered op's tile math; `scalars` as TileFn's.
template <typename T>
void tile_op(std::string_view op, std::initializer_list<const void*> inputs, uint32_t scalars, T* y,
             int64_t n) {
  const ir::TileFn fn = ir::get_op(op).elementwise->for_dtype(ir::dtype_of<T>());
  fn(std::data(inputs), scalars, y, n);
}

// The separate ops' math for the library activations, a tile at a time: silu = mul(y, sigmoid(y)),
// hardsigmoid = minimum(maximum(add(mul(y, 1/6), 0.5), 0), 1) (PyTorch's, as ONNX HardSigmoid
// with alpha 1/6 imports), hardswish = mul(y, hardsigmoid(y)).
template <typename T>
void apply_library_activation(T* y, int64_t n, ConvActivation::Kind kind) {
  using Kind = ConvActivation::Kind;
  constexpr int64_t kTile = 1024;
  T t[kTile];
  const T sixth = T(1.0 / 6.0), half = T(0.5), zero = T(0), one = T(1);
  for (int64_t i = 0; i < n; i += kTile) {
    const int64_t m = std::min(kTile, n - i);
    T* v = y + i;
    if (kind == Kind::kSigmoid || kind == Kind::kSilu) {
      tile_op<T>("sigmoid", {v}, 0, t, m);
    } else {
      tile_op<T>("mul", {v, &sixth}, 2, t, m);
      tile_op<T>("add", {t, &half}, 2, t, m);
      tile_op<T>("maximum", {t, &zero}, 2, t, m);
      tile_op<T>("minimum", {t, &one}, 2, t, m);
    }
    if (kind == Kind::kSigmoid || kind == Kind::kHardsigmoid) {
      std::copy(t, t + m, v);
    } else {
      tile_op<T>("mul", {v, t}, 0, v, m);
    }
  }
}

// The activation as its own pass over y (float64, which oneDNN does not run, the plain-layout
// float32 path, the direct kernels for the library activations, and wherever oneDNN would change
// its kernel for the post-op).
template <typename T>
void apply_activation(const ir::KernelContext& ctx, const ConvActivation& a) {
  if (a.kind == ConvActivation::Kind::kNone) return;
  T* y = ctx.outputs[0].as<T>();
  parallel_for(ir::num_elements(ctx.outputs[0].type.shape), 16384, [&](int64_t begin, int64_t end) {
    if (!a.exact()) return apply_library_activation(y + begin, end - begin, a.kind);
    for (int64_t i = begin; i < end; ++i) y[i] = a.apply(y[i]);
  });
}

// The library activation as oneDNN post-ops.
void append_library_post_ops(dnnl::post_ops& post_ops, ConvActivation::Kind kind) {
  using Kind = ConvActivation::Kind;
  switch (kind) {
    case Kind::kSilu:
      post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
      break;
    case Kind::kSigmoid:
      post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
      break;
    case Kind::kHardswish:
      post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_hardswish, 0.f, 0.f);
      break;
    case Kind::kHardsigmoid:
      post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / 6.f, 0.5f);
      post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 1.f);
      break;
    default:
      break;
  }
}

Window conv_window(const Shape& x, const Shape& w, const Attrs& attrs) {
  return make_window("conv2d", x, w[2], w[3], attrs, true);
}

std::vector<TensorType> infer_conv2d(std::span<const TensorType> in, const Attrs& attrs) {
  check_nchw("conv2d", in[0]);
  common_dtype("conv2d", in);
  conv_activation(attrs);  // checked here, before any kernel
  const bool last = channels_last("conv2d", attrs);
  const Shape x = nchw_sizes(in[0].shape, last);
  const Shape& w = in[1].shape;
  MF_CHECK(w.size() == 4, InvalidArgument,
           "conv2d: weight must be (out_channels, in_channels / groups, kh, kw), got ",
           ir::shape_to_string(w));
  const int64_t groups = ir::attr_int(attrs, "groups", "conv2d");
  MF_CHECK(groups >= 1 && x[1] % groups == 0 && w[0] % groups == 0, InvalidArgument,
           "conv2d: groups (", groups, ") must divide both the input channels (", x[1],
           ") and the output channels (", w[0], ")");
  MF_CHECK(w[1] * groups == x[1], InvalidArgument, "conv2d: weight ", ir::shape_to_string(w),
           " expects ", w[1], " channels per group, but x ", ir::shape_to_string(x), " has ", x[1],
           " channels in ", groups, " group(s) (", x[1] / groups, " per group)");
  if (in.size() == 3) {
    MF_CHECK(in[2].shape == Shape{w[0]}, InvalidArgument, "conv2d: bias must have shape (", w[0],
             "), got ", ir::shape_to_string(in[2].shape));
  }
  const Window win = conv_window(x, w, attrs);
  return {{in[0].dtype, in_format({x[0], w[0], win.oh, win.ow}, last)}};
}

template <typename T>
void conv2d_typed(const ir::KernelContext& ctx) {
  const Shape& xs = ctx.inputs[0].type.shape;
  const Shape& ws = ctx.inputs[1].type.shape;
  const Window win = conv_window(xs, ws, ctx.attrs);
  const int64_t groups = ir::attr_int(ctx.attrs, "groups", ctx.op_name);
  const int64_t batch = xs[0], channels = xs[1], height = xs[2], width = xs[3];
  const int64_t out_channels = ws[0];
  const int64_t cg = channels / groups, og = out_channels / groups;
  const int64_t patch = cg * win.kh * win.kw;
  const int64_t plane = win.oh * win.ow;
  const T* x = ctx.inputs[0].as<T>();
  const T* w = ctx.inputs[1].as<T>();
  const T* bias = ctx.inputs.size() == 3 ? ctx.inputs[2].as<T>() : nullptr;
  T* y = ctx.outputs[0].as<T>();
  // A 1x1 window with unit stride and no padding reads the input plane as it is: no im2col.
  const bool direct = win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.top == 0 &&
                      win.bottom == 0 && win.left == 0 && win.right == 0;
  parallel_for(batch * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> col(direct ? 0 : patch * plane);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / groups, g = item % groups;
      const T* xg = x + (n * channels + g * cg) * height * width;
      const T* cols = xg;
      if (!direct) {
        // Row (c, i, j) of col holds x[c, oh*sh - top + i*dh, ow*sw - left + j*dw] for every (oh,
        // ow).
        T* dst = col.data();
        for (int64_t c = 0; c < cg; ++c) {
          for (int64_t i = 0; i < win.kh; ++i) {
            for (int64_t j = 0; j < win.kw; ++j) {
              for (int64_t oy = 0; oy < win.oh; ++oy) {
                const int64_t iy = oy * win.sh - win.top + i * win.dh;
                if (iy < 0 || iy >= height) {
                  std::fill(dst, dst + win.ow, T(0));
                  dst += win.ow;
                  continue;
                }
                const T* src = xg + (c * height + iy) * width;
                for (int64_t ox = 0; ox < win.ow; ++ox) {
                  const int64_t ix = ox * win.sw - win.left + j * win.dw;
                  *dst++ = (ix >= 0 && ix < width) ? src[ix] : T(0);
                }
              }
            }
          }
        }
        cols = col.data();
      }
      // Each output sums its patch in index order, one multiply and one add per term, on any
      // thread. Eigen's product here (a vector-matrix one when og is 1) gave different bits on
      // the calling thread and on the pool's threads, depending on the process's memory layout
      // (the path of the executable was enough to change them).
      T* out = y + (n * out_channels + g * og) * plane;
      const T* wg = w + g * og * patch;
      for (int64_t o = 0; o < og; ++o) {
        T* row = out + o * plane;
        std::fill(row, row + plane, T(0));
        for (int64_t k = 0; k < patch; ++k) {
          const T weight = wg[o * patch + k];
          const T* in = cols + k * plane;
          for (int64_t p = 0; p < plane; ++p) row[p] += weight * in[p];
        }
        if (bias != nullptr) {
          for (int64_t p = 0; p < plane; ++p) row[p] += bias[g * og + o];
        }
      }
    }
  });
}

// A oneDNN convolution for one (input shapes, attributes, thread count), float32 only. The
// tensors are plain (x, y nchw; weight goihw). In plain layouts oneDNN 2.6 has only its im2col +
// sgemm convolution (gemm:jit), and for depthwise not even that at speed; its direct kernels
// (brgconv, jit_uni_dw) want channel-blocked layouts. So where the output plane is large enough
// that reordering the weights on every call costs little next to the convolution itself (the
// weights are not known to be constant here: reordering them once, ahead, is a compile-time step),
// the primitive is created with layouts of its choice (format "any") and the kernel reorders x and
// the weights in, and y out; otherwise it runs in the plain layouts directly.
struct DnnlConv {
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, weights, bias, dst;  // what the primitive reads and writes
  dnnl::memory::desc scratchpad;
  dnnl::memory::desc user_src, user_weights, user_dst;  // the plain tensors
  // Plain -> primitive layouts and back; empty (no handle) when the layouts agree.
  dnnl::reorder src_in, weights_in, dst_out;
  // The activation the kernel applies after the primitive; kNone when the primitive applies it
  // (a post-op) or there is none.
  ConvActivation activation_after;
  bool plain = false;  // oneDNN's im2col + sgemm convolution in nchw / goihw
};

using dnnl_dims = dnnl::memory::dims;

// Blocked layouts pay off when each weight is used for enough output positions that reordering
// the weights is small against the convolution (measured: benchmarks/dnnl_kernels_bench.cc), and
// always for depthwise convolutions (tiny weights, no good plain kernel).
bool use_blocked_layout(const Shape& ws, const Window& win, int64_t groups, bool deterministic) {
  // In plain layouts oneDNN runs its im2col + sgemm convolution, whose sgemm splits the reduction
  // differently by thread count (bits changed between 1 and 2 threads on a 3x3 512 -> 512 over
  // 7x7, batch 2); the direct kernels of the blocked layouts do not split it.
  if (deterministic) return true;
  switch (dnnl_rt::conv_layout()) {
    case dnnl_rt::ConvLayout::kPlain:
      return false;
    case dnnl_rt::ConvLayout::kBlocked:
      return true;
    case dnnl_rt::ConvLayout::kAuto:
      break;
  }
  const bool depthwise = groups > 1 && ws[1] == 1;
  if (depthwise) return true;
  // A 1x1 convolution is a plain GEMM over the channels: 1.6x faster in nchw than with blocked
  // layouts and their reorders (1x1/2 64->128 on 56x56: 121 vs 78 GFLOP/s, one thread,
  // dnnl_kernels_bench).
  if (ws[2] == 1 && ws[3] == 1) return false;
  return win.oh * win.ow >= kBlockedMinOutputPlane;
}

// The implementation oneDNN picks on this CPU for a float32 3x3 convolution over channels-last
// 14x14 activations of `channels` channels in `groups` groups ("brg_conv_fwd:avx512_core",
// "jit:avx2", ...).
std::string channels_last_conv_impl(int64_t channels, int64_t groups) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const dnnl::memory::desc src({1, channels, 14, 14}, f32, tag::nhwc);
  const dnnl::memory::desc dst({1, channels, 14, 14}, f32, tag::nhwc);
  const dnnl_dims weight_dims = groups == 1
                                    ? dnnl_dims{channels, channels, 3, 3}
                                    : dnnl_dims{groups, channels / groups, channels / groups, 3, 3};
  const dnnl::memory::desc weights(weight_dims, f32, tag::any);
  const dnnl::memory::desc bias({channels}, f32, tag::a);
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src, weights,
                                             bias, dst, {1, 1}, {1, 1}, {1, 1});
  return dnnl::convolution_forward::primitive_desc(desc, dnnl_rt::cpu_engine()).impl_info_str();
}

}  // namespace

// brgconv (AVX-512) runs as fast on nhwc activations as on its own blocked layout. Asked once.
bool onednn_channels_last_conv_is_brgconv() {
  static const bool brgconv = channels_last_conv_impl(64, 1).find("brg") != std::string::npos;
  return brgconv;
}

namespace {

// FLOPs per byte of activations (x read, y written) from which a one-group convolution runs in
// oneDNN's own blocked layout (nChw8c on AVX2) with x reordered in and y out, where its nhwc
// kernel is not brgconv. jit:avx2 in nhwc ran at half its blocked speed on convolutions with many
// channels (inception_v3's 3x3 80 -> 192 over 73x73: 41 against 21 ms; resnet50's 3x3 512 -> 512
// over 7x7: 5.3 against 3.7), and at its blocked speed on thin ones (3x3 64 -> 64 over 56x56,
// 144 FLOP per byte; 1x1 1024 -> 256 over 14x14, 103): there the two reorders, a pass over the
// activations each, would cost more than they save. Measured with ONEDNN_VERBOSE, one thread.
constexpr double kBlockedActivationsMinFlopsPerByte = 200;

bool blocked_activations_pay(const Shape& xs, const Shape& ws, const Window& win, int64_t groups) {
  if (groups != 1 || onednn_channels_last_conv_is_brgconv()) return false;
  const double outputs = double(xs[0]) * double(ws[0]) * double(win.oh) * double(win.ow);
  const double flops = 2 * outputs * double(ws[1]) * double(ws[2]) * double(ws[3]);
  const double bytes =
      4 * (double(xs[0]) * double(xs[1]) * double(xs[2]) * double(xs[3]) + outputs);
  return bytes > 0 && flops >= kBlockedActivationsMinFlopsPerByte * bytes;
}

// The cached primitive for conv2d over float32 `in` with `attrs`, created for `threads` OpenMP
// threads (the caller holds ScopedOmpThreads(threads) while creating and running it).
std::shared_ptr<const DnnlConv> dnnl_conv2d(std::span<const TensorType> in, const Attrs& attrs,
                                            int threads, bool deterministic) {
  const bool last = channels_last("conv2d", attrs);
  const Shape xs = nchw_sizes(in[0].shape, last);
  const Shape& ws = in[1].shape;
  const Window win = conv_window(xs, ws, attrs);
  const int64_t groups = ir::attr_int(attrs, "groups", "conv2d");
  const bool has_bias = in.size() == 3;
  const ConvActivation activation = conv_activation(attrs);
  // Channels-last activations always run a direct kernel: on nhwc, or, where that kernel is slow
  // and the convolution heavy enough (blocked_activations_pay), on oneDNN's blocked layout with
  // reorders around it. The choice depends on the shapes alone, so an NCHW and an NHWC node (and
  // every mode) run the same primitive.
  const bool own_layout = blocked_activations_pay(xs, ws, win, groups);
  const bool blocked = own_layout || last || use_blocked_layout(ws, win, groups, deterministic);
  dnnl_rt::PrimitiveKey key("conv2d");
  key.add(std::span<const int64_t>(xs))
      .add(std::span<const int64_t>(ws))
      .add({win.sh, win.sw, win.top, win.bottom, win.left, win.right, win.dh, win.dw, groups,
            has_bias ? 1 : 0, blocked ? 1 : 0, last ? 1 : 0, threads,
            static_cast<int64_t>(activation.kind)})
      .add(std::bit_cast<int64_t>(activation.lo))
      .add(std::bit_cast<int64_t>(activation.hi));
  return dnnl_rt::primitive_cache().get<DnnlConv>(key, [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    auto conv = std::make_shared<DnnlConv>();
    const dnnl_dims src_dims(xs.begin(), xs.end());
    const dnnl_dims dst_dims = {xs[0], ws[0], win.oh, win.ow};
    const dnnl_dims weight_dims = {groups, ws[0] / groups, ws[1], ws[2], ws[3]};
    const tag user_tag = last ? tag::nhwc : tag::nchw;
    conv->user_src = dnnl::memory::desc(src_dims, f32, user_tag);
    conv->user_dst = dnnl::memory::desc(dst_dims, f32, user_tag);
    conv->user_weights = dnnl::memory::desc(weight_dims, f32, tag::goihw);
    if (has_bias) conv->bias = dnnl::memory::desc({ws[0]}, f32, tag::a);
    // The direct kernels (brgconv, brdgmm_dw) run as fast in channels-last (nhwc) as in oneDNN's
    // own choice of blocked layout (benchmarks/dnnl_kernels_bench.cc), and nhwc is a layout the
    // graph can keep between ops: an NCHW and an NHWC node run the very same primitive, so the
    // format-transform pass changes no bits.
    const tag activations = own_layout ? tag::any : tag::nhwc;
    const dnnl::memory::desc src =
        blocked ? dnnl::memory::desc(src_dims, f32, activations) : conv->user_src;
    const dnnl::memory::desc dst =
        blocked ? dnnl::memory::desc(dst_dims, f32, activations) : conv->user_dst;
    const dnnl::memory::desc weights =
        blocked ? dnnl::memory::desc(weight_dims, f32, tag::any) : conv->user_weights;
    // oneDNN counts dilation from 0 (1 = one gap); output sizes round down as here.
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, weights,
        conv->bias, dst, {win.sh, win.sw}, {win.dh - 1, win.dw - 1}, {win.top, win.left},
        {win.bottom, win.right});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The activation as an eltwise post-op on the direct kernels. The plain layouts' im2col +
    // sgemm convolution adds the bias in another order once it has a post-op (bits changed
    // against the unfused ops: dnnl_kernels_test), so there it is a pass after the primitive.
    conv->plain = !blocked;
    dnnl::convolution_forward::primitive_desc pd(desc, attr, dnnl_rt::cpu_engine());
    if (!blocked) {
      conv->activation_after = activation;
    } else if (activation.kind != ConvActivation::Kind::kNone) {
      dnnl::post_ops post_ops;
      if (!activation.exact()) {
        append_library_post_ops(post_ops, activation.kind);
      } else if (activation.kind == ConvActivation::Kind::kRelu) {
        // As clip to [0, inf): max(y, 0), never oneDNN's relu, whose AVX2 kernel gives -0 for a
        // negative y (0 * y) where the relu op gives +0.
        post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f,
                                std::numeric_limits<float>::infinity());
      } else {
        post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip,
                                static_cast<float>(activation.lo),
                                static_cast<float>(activation.hi));
      }
      dnnl::primitive_attr with_post_op = attr;
      with_post_op.set_post_ops(post_ops);
      const dnnl::convolution_forward::primitive_desc fused(desc, with_post_op,
                                                            dnnl_rt::cpu_engine());
      // The post-op keeps the unfused bits only when oneDNN runs the same kernel with it. On
      // some CPUs it picks another for a post-op (AVX2, grouped convolutions: another summation
      // order), and then the activation is a pass after the plain primitive instead. (For the
      // library activations the bits differ anyway; another kernel could be a slower one.)
      if (std::string(fused.impl_info_str()) == pd.impl_info_str()) {
        pd = fused;
      } else {
        conv->activation_after = activation;
      }
    }
    conv->primitive = dnnl::convolution_forward(pd);
    conv->scratchpad = pd.scratchpad_desc();
    conv->src = pd.src_desc();
    conv->weights = pd.weights_desc();
    conv->dst = pd.dst_desc();
    conv->src_in = dnnl_rt::make_reorder(conv->user_src, conv->src);
    conv->weights_in = dnnl_rt::make_reorder(conv->user_weights, conv->weights);
    conv->dst_out = dnnl_rt::make_reorder(conv->dst, conv->user_dst);
    return std::shared_ptr<const DnnlConv>(conv);
  });
}

// What a compiled graph keeps for a conv2d (KernelContext::prepared points to this base): which
// kernel it was prepared for, so a kernel never reads another's state (the choice between them can
// change between compiling and running only by forcing a oneDNN layout, but then safely).
struct PreparedConvState {
  enum class Kernel { kOneDnn, kPacked };
  explicit PreparedConvState(Kernel k) : kernel(k) {}
  const Kernel kernel;
};

// The state for `kernel`'s type in ctx.prepared, or null when there is none or it is another's.
template <typename State>
const State* prepared_state(const ir::KernelContext& ctx) {
  const auto* base = static_cast<const PreparedConvState*>(ctx.prepared);
  if (base == nullptr || base->kernel != State::kKernel) return nullptr;
  return static_cast<const State*>(base);
}

// The state a compiled graph keeps for a conv2d whose weights are one of its constants: the
// primitive it prepared and the weights already in that primitive's layout, reordered once at
// compile time rather than on every call.
struct PreparedConv : PreparedConvState {
  static constexpr Kernel kKernel = Kernel::kOneDnn;
  PreparedConv() : PreparedConvState(kKernel) {}
  std::shared_ptr<const DnnlConv> conv;
  int threads = 1;
  bool deterministic = false;
  dnnl::memory weights;  // owns its bytes; conv->weights layout
};

// `weights` (the user's goihw bytes) in `conv`'s layout, in memory of their own.
dnnl::memory reorder_weights(const DnnlConv& conv, const void* weights) {
  return dnnl_rt::reordered_copy(conv.weights_in, conv.user_weights, conv.weights, weights);
}

// Weights whose bytes are known unchanged (a parameter bound again, an eager tensor) in `conv`'s
// layout, reordered on their first use and kept in reordered_weights_cache() under their content
// identity and the primitive: GRAPH O1 without infer_boost reordered every weight on every run
// (resnet18: 27.2 ms against 22.1 with the weights compiled in, one thread).
dnnl::memory reordered_weights(const std::shared_ptr<const DnnlConv>& conv,
                               const ir::TensorView& user) {
  return dnnl_rt::kept_copy({"conv2d weights", user.content_id, user.content_version, conv},
                            conv->weights_in, conv->user_weights, conv->weights, user.data);
}

void conv2d_dnnl(const ir::KernelContext& ctx) {
  const int threads = dnnl_rt::kernel_threads();
  dnnl_rt::ScopedOmpThreads omp(threads);
  // The prepared primitive when this run has the threads and mode it was made for; otherwise the
  // cache's, with the prepared weights only if that primitive wants the same layout.
  const auto* prepared = prepared_state<PreparedConv>(ctx);
  std::shared_ptr<const DnnlConv> conv;
  if (prepared != nullptr && prepared->threads == threads &&
      prepared->deterministic == ctx.deterministic) {
    conv = prepared->conv;
  } else {
    std::vector<TensorType> in = {ctx.inputs[0].type, ctx.inputs[1].type};
    if (ctx.inputs.size() == 3) in.push_back(ctx.inputs[2].type);
    conv = dnnl_conv2d(in, ctx.attrs, threads, ctx.deterministic);
    if (prepared != nullptr && prepared->conv->weights != conv->weights) prepared = nullptr;
  }
  const dnnl::engine& engine = dnnl_rt::cpu_engine();
  dnnl::stream& stream = dnnl_rt::thread_stream();
  const dnnl::memory src =
      dnnl_rt::operand_in(conv->src_in, conv->user_src, conv->src, ctx.inputs[0].data, 0, stream);
  dnnl::memory weights;
  if (prepared != nullptr) {
    weights = prepared->weights;
  } else if (conv->weights_in && ctx.inputs[1].content_id != 0) {
    weights = reordered_weights(conv, ctx.inputs[1]);
  } else {
    weights = dnnl_rt::operand_in(conv->weights_in, conv->user_weights, conv->weights,
                                  ctx.inputs[1].data, 1, stream);
  }
  dnnl::memory user_dst(conv->user_dst, engine, ctx.outputs[0].data);
  dnnl::memory dst = conv->dst_out ? dnnl::memory(conv->dst, engine,
                                                  dnnl_rt::reorder_buffer(2, conv->dst.get_size()))
                                   : user_dst;
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (conv->scratchpad.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(conv->scratchpad, engine,
                              dnnl_rt::thread_scratchpad(conv->scratchpad.get_size())));
  }
  if (ctx.inputs.size() == 3) {
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(conv->bias, engine, ctx.inputs[2].data));
  }
  conv->primitive.execute(stream, args);
  if (conv->dst_out) conv->dst_out.execute(stream, dst, user_dst);
  stream.wait();
  apply_activation<float>(ctx, conv->activation_after);
}

// Whether oneDNN's channels-last depthwise kernel on this CPU is brdgmm_dw, the one whose bits
// depthwise_conv.cc reproduces (each output an FMA chain over its taps from 0, then the bias).
// Elsewhere (AVX2: another kernel, another order) an NCHW depthwise convolution runs oneDNN's
// channels-last kernel too, so the layout never changes the bits. Asked once.
bool onednn_depthwise_is_brdgmm() {
  static const bool brdgmm = channels_last_conv_impl(32, 32).find("brdgmm") != std::string::npos;
  return brdgmm;
}

// A float32 NCHW depthwise convolution (one input and one output channel per group) runs in
// depthwise_conv.cc, not oneDNN: see that file for why.
bool runs_depthwise_nchw(std::span<const TensorType> in, const Attrs& attrs) {
  if (in[0].dtype != DType::kFloat32 || channels_last("conv2d", attrs)) return false;
  const int64_t groups = ir::attr_int(attrs, "groups", "conv2d");
  const bool depthwise =
      groups > 1 && in[0].shape[1] == groups && in[1].shape[0] == groups && in[1].shape[1] == 1;
  if (!depthwise) return false;
  if (onednn_depthwise_is_brdgmm()) return true;
  // Elsewhere only what oneDNN cannot describe at all (strides, padding or dilation beyond 32
  // bits: no layout would run it there) comes here.
  const Window w = conv_window(in[0].shape, in[1].shape, attrs);
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  return std::max({w.top, w.bottom, w.left, w.right, w.sh, w.sw, w.dh, w.dw}) > kMax32;
}

// The activation attributes in the direct kernels' form (float bounds).
DirectActivation direct_activation(const Attrs& attrs) {
  const ConvActivation a = conv_activation(attrs);
  DirectActivation activation;
  activation.kind = a.kind == ConvActivation::Kind::kRelu   ? DirectActivation::Kind::kRelu
                    : a.kind == ConvActivation::Kind::kClip ? DirectActivation::Kind::kClip
                                                            : DirectActivation::Kind::kNone;
  activation.lo = static_cast<float>(a.lo);
  activation.hi = static_cast<float>(a.hi);
  return activation;
}

void conv2d_depthwise_nchw(const ir::KernelContext& ctx) {
  const Shape& xs = ctx.inputs[0].type.shape;
  const Shape& ws = ctx.inputs[1].type.shape;
  const WindowGeometry g = window_geometry(xs, conv_window(xs, ws, ctx.attrs));
  const DirectActivation activation = direct_activation(ctx.attrs);
  depthwise_conv2d_nchw(ctx.inputs[0].as<float>(), ctx.inputs[1].as<float>(),
                        ctx.inputs.size() == 3 ? ctx.inputs[2].as<float>() : nullptr,
                        ctx.outputs[0].as<float>(), g, activation);
}

// The NCHW-ordered window geometry of conv2d over `in` (x in the format `attrs` name).
WindowGeometry conv_geometry(std::span<const TensorType> in, const Attrs& attrs) {
  const Shape xs = nchw_sizes(in[0].shape, channels_last("conv2d", attrs));
  return window_geometry(xs, conv_window(xs, in[1].shape, attrs));
}

// A float32 convolution whose weights outweigh its output plane runs packed_conv.cc, not oneDNN:
// see that file for why. The choice depends on the shapes only (not the format, the threads or
// deterministic), so every mode and level runs the same kernel and gets the same bits. Forcing a
// oneDNN layout (MF_DNNL_CONV_LAYOUT, for measuring) turns it off.
bool runs_packed(std::span<const TensorType> in, const Attrs& attrs) {
  if (in[0].dtype != DType::kFloat32 || in[0].shape.size() != 4 || in[1].shape.size() != 4) {
    return false;
  }
  if (dnnl_rt::conv_layout() != dnnl_rt::ConvLayout::kAuto) return false;
  return packed_conv_applies(conv_geometry(in, attrs), in[1].shape[0],
                             ir::attr_int(attrs, "groups", "conv2d"));
}

// The state a compiled graph keeps for a packed conv2d whose weights are one of its constants.
struct PreparedPackedConv : PreparedConvState {
  static constexpr Kernel kKernel = Kernel::kPacked;
  PreparedPackedConv() : PreparedConvState(kKernel) {}
  std::shared_ptr<const PackedConvWeights> weights;
};

// Weights with a content identity packed once and kept in the reordered-weights cache (as
// reordered_weights does for oneDNN's layouts).
std::shared_ptr<const PackedConvWeights> cached_packed_weights(const ir::TensorView& user,
                                                               const WindowGeometry& g,
                                                               int64_t out_channels) {
  dnnl_rt::PrimitiveKey key("conv2d packed weights");
  key.add(static_cast<int64_t>(user.content_id)).add({out_channels, g.channels, g.kh, g.kw});
  return dnnl_rt::reordered_weights_cache().get_version<PackedConvWeights>(
      key, user.content_version,
      [&] { return pack_conv_weights(user.as<float>(), g, out_channels); },
      static_cast<size_t>(ir::num_elements(user.type.shape)) * sizeof(float));
}

void conv2d_packed(const ir::KernelContext& ctx) {
  const TensorType in[] = {ctx.inputs[0].type, ctx.inputs[1].type};
  const WindowGeometry g = conv_geometry(in, ctx.attrs);
  const int64_t out_channels = ctx.inputs[1].type.shape[0];
  std::shared_ptr<const PackedConvWeights> weights;
  if (const auto* prepared = prepared_state<PreparedPackedConv>(ctx)) {
    weights = prepared->weights;
  } else if (ctx.inputs[1].content_id != 0) {
    weights = cached_packed_weights(ctx.inputs[1], g, out_channels);
  } else {
    weights = pack_conv_weights(ctx.inputs[1].as<float>(), g, out_channels);
  }
  const DirectActivation activation = direct_activation(ctx.attrs);
  const float* bias = ctx.inputs.size() == 3 ? ctx.inputs[2].as<float>() : nullptr;
  if (channels_last("conv2d", ctx.attrs)) {
    return packed_conv2d_nhwc(ctx.inputs[0].as<float>(), *weights, bias, ctx.outputs[0].as<float>(),
                              g, activation);
  }
  // NCHW (format transform off): x transposed in and y out, as oneDNN's channels-last path does.
  const Shape x_nchw = ctx.inputs[0].type.shape, y_nchw = ctx.outputs[0].type.shape;
  float* x =
      dnnl_rt::reorder_buffer(0, static_cast<size_t>(ir::num_elements(x_nchw)) * sizeof(float));
  float* y =
      dnnl_rt::reorder_buffer(2, static_cast<size_t>(ir::num_elements(y_nchw)) * sizeof(float));
  transpose_activation(ctx.inputs[0].as<float>(), x, x_nchw, false);
  packed_conv2d_nhwc(x, *weights, bias, y, g, activation);
  transpose_activation(y, ctx.outputs[0].as<float>(), y_nchw, true);
}

// No input channel (x or the weights empty, y not): every output is its bias, or 0, then the
// activation, as the sum over no terms gives. oneDNN has no primitive for zero channels.
template <typename T>
void conv2d_no_channels(const ir::KernelContext& ctx) {
  const Shape& ys = ctx.outputs[0].type.shape;
  const bool last = channels_last("conv2d", ctx.attrs);
  const int64_t channels = last ? ys[3] : ys[1];
  const int64_t inner = last ? 1 : ys[2] * ys[3];
  const T* bias = ctx.inputs.size() == 3 ? ctx.inputs[2].as<T>() : nullptr;
  T* y = ctx.outputs[0].as<T>();
  const int64_t n = ir::num_elements(ys);
  for (int64_t i = 0; i < n; ++i) y[i] = bias != nullptr ? bias[(i / inner) % channels] : T(0);
  apply_activation<T>(ctx, conv_activation(ctx.attrs));
}

void conv2d_kernel(const ir::KernelContext& ctx) {
  if (ir::num_elements(ctx.inputs[0].type.shape) == 0 ||
      ir::num_elements(ctx.inputs[1].type.shape) == 0) {
    if (ctx.outputs[0].type.dtype == DType::kFloat64) return conv2d_no_channels<double>(ctx);
    return conv2d_no_channels<float>(ctx);
  }
  // oneDNN convolves float32 only: float64 keeps the im2col path.
  if (ctx.outputs[0].type.dtype == DType::kFloat64) {
    if (channels_last("conv2d", ctx.attrs)) {
      run_nhwc_as_nchw(ctx, conv2d_typed<double>);
    } else {
      conv2d_typed<double>(ctx);
    }
    return apply_activation<double>(ctx, conv_activation(ctx.attrs));
  }
  if (ir::num_elements(ctx.outputs[0].type.shape) == 0) return;
  const TensorType in[] = {ctx.inputs[0].type, ctx.inputs[1].type};
  // The direct kernels apply relu and clip themselves (direct_activation), the library
  // activations after.
  if (runs_depthwise_nchw(in, ctx.attrs)) {
    conv2d_depthwise_nchw(ctx);
  } else if (runs_packed(in, ctx.attrs)) {
    conv2d_packed(ctx);
  } else {
    return conv2d_dnnl(ctx);
  }
  const ConvActivation activation = conv_activation(ctx.attrs);
  if (!activation.exact()) apply_activation<float>(ctx, activation);
}

// Creates the primitive; with constant weights in another layout than theirs, also reorders them
// once into a PreparedConv.
dnnl_rt::Prepared prepare_conv2d(const dnnl_rt::PrepareRequest& request) {
  std::span<const TensorType> in = request.inputs;
  if (in[0].dtype != DType::kFloat32 || runs_depthwise_nchw(in, request.attrs)) return {};
  if (runs_packed(in, request.attrs)) {
    // Nothing to create; constant weights are packed once, here.
    const void* weights = request.constant(1);
    if (weights == nullptr) return {true, nullptr};
    auto state = std::make_shared<PreparedPackedConv>();
    state->weights = pack_conv_weights(static_cast<const float*>(weights),
                                       conv_geometry(in, request.attrs), in[1].shape[0]);
    return {true, std::shared_ptr<const PreparedConvState>(state)};
  }
  std::shared_ptr<const DnnlConv> conv =
      dnnl_conv2d(in, request.attrs, request.threads, request.deterministic);
  if (conv->plain) dnnl_rt::warm_up_sgemm();  // at compile time, not in the first run
  const void* weights = request.constant(1);
  if (weights == nullptr || !conv->weights_in || ir::num_elements(in[1].shape) == 0) {
    return {true, nullptr};
  }
  auto state = std::make_shared<PreparedConv>();
  state->conv = conv;
  state->threads = request.threads;
  state->deterministic = request.deterministic;
  state->weights = reorder_weights(*conv, weights);
  return {true, std::shared_ptr<const PreparedConvState>(state)};
}

const dnnl_rt::PreparerRegistration kPrepareConv2d("conv2d", prepare_conv2d);

}  // namespace

void reorder_conv2d_weights_ahead(std::span<const TensorType> in, const Attrs& attrs,
                                  const ir::TensorView& weights, int threads, bool deterministic) {
  if (in.size() < 2 || in[0].dtype != DType::kFloat32 || weights.content_id == 0) return;
  if (runs_depthwise_nchw(in, attrs) || ir::num_elements(in[1].shape) == 0) return;
  if (runs_packed(in, attrs)) {
    cached_packed_weights(weights, conv_geometry(in, attrs), in[1].shape[0]);
    return;
  }
  dnnl_rt::ScopedOmpThreads omp(threads);
  const std::shared_ptr<const DnnlConv> conv = dnnl_conv2d(in, attrs, threads, deterministic);
  if (conv->weights_in) reordered_weights(conv, weights);
}

bool depthwise_nchw_matches_onednn() {
  return onednn_depthwise_is_brdgmm();
}

bool conv2d_runs_packed(std::span<const TensorType> in, const Attrs& attrs) {
  return in.size() >= 2 && runs_packed(in, attrs);
}

bool conv2d_runs_blocked_activations(std::span<const TensorType> in, const Attrs& attrs) {
  if (in.size() < 2 || in[0].dtype != DType::kFloat32 || in[0].shape.size() != 4) return false;
  if (runs_depthwise_nchw(in, attrs) || runs_packed(in, attrs)) return false;
  const Shape xs = nchw_sizes(in[0].shape, channels_last("conv2d", attrs));
  return blocked_activations_pay(xs, in[1].shape, conv_window(xs, in[1].shape, attrs),
                                 ir::attr_int(attrs, "groups", "conv2d"));
}

bool conv2d_reorders_to_channels_last(std::span<const TensorType> in, const Attrs& attrs,
                                      bool deterministic) {
  if (in.size() < 2 || in[0].dtype != DType::kFloat32 || in[0].shape.size() != 4) return false;
  if (channels_last("conv2d", attrs) || runs_depthwise_nchw(in, attrs)) return false;
  const Shape& ws = in[1].shape;
  const Window win = conv_window(in[0].shape, ws, attrs);
  if (in[0].shape[0] == 0 || ws[0] == 0 || win.oh == 0 || win.ow == 0) return false;  // empty y
  if (runs_packed(in, attrs)) return true;  // its kernel reads and writes channels-last
  return use_blocked_layout(ws, win, ir::attr_int(attrs, "groups", "conv2d"), deterministic);
}

namespace {

std::vector<RefTensor> conv2d_nchw_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& xs = in[0].shape;
  const Shape& ws = in[1].shape;
  const Window win = conv_window(xs, ws, attrs);
  const int64_t groups = std::get<int64_t>(attrs.at("groups"));
  const int64_t cg = xs[1] / groups, og = ws[0] / groups;
  RefTensor out = ref_tensor({xs[0], ws[0], win.oh, win.ow});
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t o = 0; o < ws[0]; ++o)
      for (int64_t oy = 0; oy < win.oh; ++oy)
        for (int64_t ox = 0; ox < win.ow; ++ox) {
          double sum = in.size() == 3 ? in[2].values[o] : 0.0;
          const int64_t g = o / og;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t iy = oy * win.sh - win.top + i * win.dh;
                const int64_t ix = ox * win.sw - win.left + j * win.dw;
                if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3]) continue;
                const int64_t channel = g * cg + c;
                sum += in[0].values[((n * xs[1] + channel) * xs[2] + iy) * xs[3] + ix] *
                       in[1].values[((o * cg + c) * ws[2] + i) * ws[3] + j];
              }
          out.values[((n * ws[0] + o) * win.oh + oy) * win.ow + ox] = sum;
        }
  return {out};
}

std::vector<RefTensor> conv2d_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  RefTensor y;
  if (!channels_last("conv2d", attrs)) {
    y = conv2d_nchw_reference(in, attrs)[0];
  } else {
    std::vector<RefTensor> nchw(in.begin(), in.end());
    nchw[0] = ref_to_nchw(in[0]);
    y = ref_to_nhwc(conv2d_nchw_reference(nchw, attrs)[0]);
  }
  // Written out, not ConvActivation::apply: the reference is independent of the kernel's code.
  const std::string& activation = std::get<std::string>(attrs.at("activation"));
  const auto hardsigmoid = [](double v) { return std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0); };
  for (double& v : y.values) {
    if (activation == "silu") v = v / (1.0 + std::exp(-v));
    if (activation == "sigmoid") v = 1.0 / (1.0 + std::exp(-v));
    if (activation == "hardswish") v = v * hardsigmoid(v);
    if (activation == "hardsigmoid") v = hardsigmoid(v);
    if (activation == "relu") v = v > 0 ? v : 0.0;
    if (activation == "clip") {
      v = std::min(std::max(v, std::get<double>(attrs.at("clip_min"))),
                   std::get<double>(attrs.at("clip_max")));
    }
  }
  return {y};
}

ir::Attrs activation_attrs(ir::Attrs attrs, std::string activation, double lo = 0, double hi = 0) {
  attrs["activation"] = std::move(activation);
  attrs["clip_min"] = lo;
  attrs["clip_max"] = hi;
  return attrs;
}

// dy through the activation fused into the convolution, from its input v (the convolution
// before the activation): relu and clip pass dy where they pass v (ties to v, as max(v, lo) and
// min(v, hi) keep v); the library activations' derivatives written out.
ir::GradValue through_activation(ir::GradBuilder& b, ir::GradValue dy, ir::GradValue v,
                                 const ConvActivation& a) {
  using Kind = ConvActivation::Kind;
  const auto c = [&](double value) { return scalar_like(b, value); };
  const auto mul = [&](ir::GradValue p, ir::GradValue q) { return b.op("mul", {p, q}); };
  // g where lo <= v <= hi, else 0.
  const auto inside = [&](ir::GradValue g, double lo, double hi) {
    const ir::GradValue upper = b.op("select", {b.op("less", {c(hi), v}), c(0), g});
    return b.op("select", {b.op("less", {v, c(lo)}), c(0), upper});
  };
  switch (a.kind) {
    case Kind::kNone:
      return dy;
    case Kind::kRelu:
      return b.op("select", {b.op("less", {c(0), v}), dy, c(0)});
    case Kind::kClip:
      return inside(dy, a.lo, a.hi);
    case Kind::kSigmoid: {
      const ir::GradValue s = b.op("sigmoid", {v});
      return mul(dy, mul(s, b.op("sub", {c(1), s})));
    }
    case Kind::kSilu: {
      // d/dv v s(v) = s (1 + v (1 - s))
      const ir::GradValue s = b.op("sigmoid", {v});
      return mul(dy, mul(s, b.op("add", {c(1), mul(v, b.op("sub", {c(1), s}))})));
    }
    case Kind::kHardsigmoid:
      return inside(mul(dy, c(1.0 / 6.0)), -3, 3);
    case Kind::kHardswish: {
      // d/dv v h(v), h = clip(v / 6 + 1/2, 0, 1): h + v / 6 inside (-3, 3)
      const ir::GradValue h =
          b.op("clip", {b.op("add", {mul(v, c(1.0 / 6.0)), c(0.5)}), c(0), c(1)});
      return mul(dy, b.op("add", {h, inside(mul(v, c(1.0 / 6.0)), -3, 3)}));
    }
  }
  return dy;
}

// Backward of conv2d: through the fused activation (the convolution recomputed without it), then
// dx and dw by the gradient ops over NCHW (channels-last operands transposed around them), and the
// bias' gradient dy summed over all but the channels.
void conv2d_backward(ir::GradBuilder& b) {
  const ConvActivation activation = conv_activation(b.attrs());
  const bool last = channels_last("conv2d", b.attrs());
  ir::GradValue dy = b.dout(0);
  if (activation.kind != ConvActivation::Kind::kNone) {
    ir::Attrs plain = b.attrs();
    plain["activation"] = std::string("none");
    std::vector<ir::GradValue> inputs;
    for (size_t i = 0; i < b.num_inputs(); ++i) inputs.push_back(b.input(i));
    dy = through_activation(b, dy, b.op("conv2d", inputs, plain), activation);
  }
  if (b.num_inputs() == 3 && b.wants_grad(2)) {
    b.set_grad(
        2, b.op("reduce_sum", {dy},
                {{"axes", last ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{0, 2, 3}}}));
  }
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  const auto nchw = [&](ir::GradValue v) {
    return last ? b.op("transpose", {v}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}) : v;
  };
  const ir::GradValue dy_nchw = nchw(dy);
  const ir::Attrs window = conv_window_attrs(b.attrs());
  if (b.wants_grad(0)) {
    const Shape x = nchw_sizes(b.input_type(0).shape, last);
    ir::Attrs attrs = window;
    attrs["input_size"] = std::vector<int64_t>{x[2], x[3]};
    const ir::GradValue dx = b.op("conv2d_grad_input", {dy_nchw, b.input(1)}, attrs);
    b.set_grad(0,
               last ? b.op("transpose", {dx}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}) : dx);
  }
  if (b.wants_grad(1)) {
    const Shape& w = b.input_type(1).shape;
    ir::Attrs attrs = window;
    attrs["kernel_size"] = std::vector<int64_t>{w[2], w[3]};
    b.set_grad(1, b.op("conv2d_grad_weight", {nchw(b.input(0)), dy_nchw}, attrs));
  }
}

const ir::OpRegistration kConv2d =
    ir::define_op("conv2d")
        .inputs(2, 3)
        .attr("stride", ir::AttrKind::kInts, std::vector<int64_t>{1, 1}, "[stride_h, stride_w]")
        .attr("padding", ir::AttrKind::kInts, std::vector<int64_t>{0, 0},
              "[pad_h, pad_w] or [top, bottom, left, right], zeros")
        .attr("dilation", ir::AttrKind::kInts, std::vector<int64_t>{1, 1},
              "[dilation_h, dilation_w]")
        .attr("groups", ir::AttrKind::kInt, int64_t{1}, "channel groups; divides C and O")
        .attr("data_format", ir::AttrKind::kString, std::string("NCHW"),
              "'NCHW', or 'NHWC' for channels-last x and y (weights stay OIHW)")
        .attr("activation", ir::AttrKind::kString, std::string("none"),
              "'none', 'relu' or 'clip' (exact), or 'silu', 'sigmoid', 'hardswish', "
              "'hardsigmoid' (oneDNN's math in float32), applied to y in the kernel "
              "(conv-epilogue-fusion)")
        .attr("clip_min", ir::AttrKind::kFloat, 0.0, "the lower bound of activation 'clip'")
        .attr("clip_max", ir::AttrKind::kFloat, 0.0, "the upper bound of activation 'clip'")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer(infer_conv2d)
        .kernel(conv2d_kernel)
        .reference(conv2d_reference)
        .samples({
            sample({f32({1, 2, 5, 5}), f32({3, 2, 3, 3})}, conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)),
            sample({f32({2, 3, 8, 8}), f32({4, 3, 3, 3}), f32({4})},
                   conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)),
            sample({f32({2, 4, 9, 7}), f32({6, 2, 3, 2}), f32({6})},
                   conv_attrs({2, 1}, {1, 2, 0, 1}, {2, 1}, 2)),
            sample({f32({1, 6, 6, 6}), f32({6, 1, 3, 3})}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 6)),
            sample({f32({2, 4, 5, 5}), f32({8, 4, 1, 1}), f32({8})},
                   conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)),
            // Odd sizes, stride 2, bias.
            sample({f32({1, 3, 11, 13}), f32({5, 3, 3, 3}), f32({5})},
                   conv_attrs({2, 2}, {1, 1}, {1, 1}, 1)),
            // A 7x7/2 stem with padding 3, as resnet's first conv.
            sample({f32({1, 3, 19, 17}), f32({8, 3, 7, 7})}, conv_attrs({2, 2}, {3, 3}, {1, 1}, 1)),
            // Strided 1x1 (resnet's downsample), no padding.
            sample({f32({1, 16, 9, 9}), f32({32, 16, 1, 1})},
                   conv_attrs({2, 2}, {0, 0}, {1, 1}, 1)),
            // Channels in whole SIMD blocks, bias.
            sample({f32({1, 64, 10, 10}), f32({64, 64, 3, 3}), f32({64})},
                   conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)),
            // Groups of 8 channels.
            sample({f32({1, 32, 8, 8}), f32({64, 8, 3, 3})}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 4)),
            // Depthwise, dilated, unequal strides.
            sample({f32({2, 8, 9, 10}), f32({8, 1, 3, 3}), f32({8})},
                   conv_attrs({2, 1}, {2, 2}, {2, 2}, 8)),
            // Depthwise with channel multiplier 2, asymmetric padding.
            sample({f32({1, 4, 7, 7}), f32({8, 1, 3, 3})},
                   conv_attrs({1, 1}, {0, 1, 1, 2}, {1, 1}, 4)),
            // Depthwise over 32 channels (mobilenet-style), stride 2.
            sample({f32({1, 32, 12, 12}), f32({32, 1, 3, 3})},
                   conv_attrs({2, 2}, {1, 1}, {1, 1}, 32)),
            // NCHW depthwise (depthwise_conv.cc) over planes wide enough for its vector paths
            // and their tails: stride 1 with bias, stride 2, a dilated 5x5 with asymmetric
            // padding.
            sample({f32({2, 3, 5, 37}), f32({3, 1, 3, 3}), f32({3})},
                   conv_attrs({1, 1}, {1, 1}, {1, 1}, 3)),
            sample({f32({1, 4, 6, 70}), f32({4, 1, 3, 3})}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 4)),
            sample({f32({1, 2, 12, 45}), f32({2, 1, 5, 5}), f32({2})},
                   conv_attrs({1, 2}, {2, 1, 3, 0}, {2, 2}, 2)),
            // Channels last: 3x3 with bias, odd sizes; depthwise, stride 2; 1x1.
            sample({f32({2, 9, 7, 6}), f32({4, 6, 3, 3}), f32({4})},
                   channels_last_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1))),
            sample({f32({1, 7, 7, 8}), f32({8, 1, 3, 3})},
                   channels_last_attrs(conv_attrs({2, 2}, {1, 1}, {1, 1}, 8))),
            sample({f32({1, 5, 5, 16}), f32({8, 16, 1, 1})},
                   channels_last_attrs(conv_attrs({1, 1}, {0, 0}, {1, 1}, 1))),
            // Activations (conv-epilogue-fusion): relu on the plain path; clip (ReLU6) on the
            // blocked path in both formats, depthwise, with bias.
            sample({f32({1, 3, 8, 8}), f32({4, 3, 3, 3})},
                   activation_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1), "relu")),
            sample({f32({1, 8, 16, 16}), f32({8, 8, 3, 3}), f32({8})},
                   activation_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1), "clip", -0.25, 0.5)),
            sample({f32({1, 9, 9, 8}), f32({8, 1, 3, 3}), f32({8})},
                   activation_attrs(channels_last_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 8)),
                                    "clip", 0.0, 0.25)),
            // Weights outweighing the plane (the packed kernel, packed_conv.cc): two panels of
            // output channels, the second cut short, each tap's 320 channels in two blocks of k,
            // bias, relu; NCHW, two images, stride, dilation, asymmetric padding; a 1x1 over 300
            // channels with clip.
            sample({f32({1, 7, 7, 320}), f32({100, 320, 3, 3}), f32({100})},
                   activation_attrs(channels_last_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)),
                                    "relu")),
            sample({f32({2, 96, 9, 11}), f32({40, 96, 3, 3})},
                   conv_attrs({2, 2}, {1, 0, 2, 1}, {1, 2}, 1)),
            sample({f32({1, 5, 5, 300}), f32({180, 300, 1, 1}), f32({180})},
                   activation_attrs(channels_last_attrs(conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)),
                                    "clip", -0.25, 0.5)),
            // Windows whose rows of taps lie inside x run a whole row as one stretch of k: a
            // patch embedding (stride = window, 3 channels), and rows of 320 values (split
            // across pixels into two blocks) under vertical padding, two images.
            sample({f32({1, 64, 64, 3}), f32({192, 3, 16, 16}), f32({192})},
                   channels_last_attrs(conv_attrs({16, 16}, {0, 0}, {1, 1}, 1))),
            sample({f32({2, 20, 17, 32}), f32({128, 20, 3, 16})},
                   conv_attrs({2, 16}, {1, 1, 0, 0}, {1, 1}, 1)),
            // Heavy enough (FLOPs per activation byte) to run on oneDNN's blocked layout where
            // its channels-last kernel is not brgconv: NCHW with bias, channels-last strided.
            sample({f32({1, 96, 19, 17}), f32({128, 96, 3, 3}), f32({128})},
                   conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)),
            sample({f32({2, 9, 9, 256}), f32({256, 256, 3, 3})},
                   activation_attrs(channels_last_attrs(conv_attrs({2, 2}, {1, 1}, {1, 1}, 1)),
                                    "relu")),
            // The library activations (oneDNN's post-op math): on the channels-last blocked
            // path with bias, through the packed kernel, the NCHW plain path, and the depthwise
            // and float64 paths (the separate ops' math after the convolution).
            sample({f32({1, 9, 7, 8}), f32({12, 8, 3, 3}), f32({12})},
                   activation_attrs(channels_last_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)),
                                    "silu"),
                   -3.0, 3.0),
            sample({f32({1, 7, 7, 320}), f32({100, 320, 3, 3}), f32({100})},
                   activation_attrs(channels_last_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1)),
                                    "hardswish")),
            sample({f32({1, 3, 8, 8}), f32({5, 3, 1, 1}), f32({5})},
                   activation_attrs(conv_attrs({1, 1}, {0, 0}, {1, 1}, 1), "sigmoid"), -3.0, 3.0),
            sample({f32({2, 3, 5, 37}), f32({3, 1, 3, 3}), f32({3})},
                   activation_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 3), "hardsigmoid"), -3.0,
                   3.0),
            sample({f32({1, 6, 6, 16}), f32({16, 1, 3, 3}), f32({16})},
                   activation_attrs(channels_last_attrs(conv_attrs({2, 2}, {1, 1}, {1, 1}, 16)),
                                    "hardswish"),
                   -4.0, 4.0),
            sample({f64({1, 2, 5, 5}), f64({3, 2, 3, 3})},
                   activation_attrs(conv_attrs({1, 1}, {1, 1}, {1, 1}, 1), "silu"), -3.0, 3.0),
        })
        .tolerance(1e-4)
        .doc("2-D convolution (cross-correlation) of NCHW x with OIHW weight, optional bias (O)")
        // Reads the bias only to recompute the convolution before a fused activation.
        .backward({.inputs = 0b111}, conv2d_backward);

}  // namespace
}  // namespace mf::runtime::ops
