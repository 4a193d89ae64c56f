#include "runtime/kernels/conv_window.h"

#include <optional>
#include <string>

namespace mf::runtime::ops {

std::vector<int64_t> pair_attr(std::string_view op, const Attrs& attrs, std::string_view name,
                               int64_t min_value) {
  const std::vector<int64_t>& v = ir::attr_ints(attrs, name, op);
  MF_CHECK(v.size() == 2, InvalidArgument, op, ": attribute '", name,
           "' must have 2 values [h, w], got ", ints_to_string(v));
  MF_CHECK(v[0] >= min_value && v[1] >= min_value, InvalidArgument, op, ": attribute '", name,
           "' must be >= ", min_value, ", got ", ints_to_string(v));
  // Window arithmetic multiplies these by kernel sizes: bounded first, so nothing wraps.
  MF_CHECK(v[0] <= ir::kMaxTensorElements && v[1] <= ir::kMaxTensorElements, InvalidArgument, op,
           ": attribute '", name, "' must be at most 2^40, got ", ints_to_string(v));
  return v;
}

std::array<int64_t, 4> padding_attr(std::string_view op, const Attrs& attrs) {
  const std::vector<int64_t>& pad = ir::attr_ints(attrs, "padding", op);
  MF_CHECK(pad.size() == 2 || pad.size() == 4, InvalidArgument, op,
           ": attribute 'padding' must be [pad_h, pad_w] or [top, bottom, left, right], got ",
           ints_to_string(pad));
  for (int64_t p : pad) {
    MF_CHECK(p >= 0 && p <= ir::kMaxTensorElements, InvalidArgument, op,
             ": padding must be in [0, 2^40], got ", ints_to_string(pad));
  }
  if (pad.size() == 2) return {pad[0], pad[0], pad[1], pad[1]};
  return {pad[0], pad[1], pad[2], pad[3]};
}

Window make_window(std::string_view op, const Shape& x, int64_t kh, int64_t kw, const Attrs& attrs,
                   bool has_dilation) {
  Window w;
  w.kh = kh;
  w.kw = kw;
  const std::vector<int64_t> stride = pair_attr(op, attrs, "stride", 1);
  w.sh = stride[0];
  w.sw = stride[1];
  const std::array<int64_t, 4> pad = padding_attr(op, attrs);
  w.top = pad[0], w.bottom = pad[1], w.left = pad[2], w.right = pad[3];
  MF_CHECK(kh >= 1 && kw >= 1 && kh <= ir::kMaxTensorElements && kw <= ir::kMaxTensorElements,
           InvalidArgument, op, ": the kernel must be 1 to 2^40 in each dimension, got ", kh, "x",
           kw);
  if (has_dilation) {
    const std::vector<int64_t> dilation = pair_attr(op, attrs, "dilation", 1);
    w.dh = dilation[0];
    w.dw = dilation[1];
  }
  // Each factor is at most 2^40: the products are checked, not wrapped.
  const auto span = [&](int64_t dilation, int64_t kernel) {
    const std::optional<int64_t> s = ir::checked_mul(dilation, kernel - 1);
    MF_CHECK(s && *s < ir::kMaxTensorElements, InvalidArgument, op, ": the window (kernel ", kernel,
             " with dilation ", dilation, ") spans more than 2^40 elements");
    return *s + 1;
  };
  const int64_t span_h = span(w.dh, w.kh), span_w = span(w.dw, w.kw);
  const int64_t in_h = x[2] + w.top + w.bottom, in_w = x[3] + w.left + w.right;
  MF_CHECK(span_h <= in_h && span_w <= in_w, InvalidArgument, op, ": the window (", span_h, "x",
           span_w, " after dilation) is larger than the padded input (", in_h, "x", in_w, ") of x ",
           ir::shape_to_string(x));
  w.oh = (in_h - span_h) / w.sh + 1;
  w.ow = (in_w - span_w) / w.sw + 1;
  return w;
}

// The window over the planes of `x` (NCHW sizes), for the direct kernels.
WindowGeometry window_geometry(const Shape& x, const Window& w) {
  WindowGeometry g;
  g.batch = x[0], g.channels = x[1], g.h = x[2], g.w = x[3], g.oh = w.oh, g.ow = w.ow;
  g.kh = w.kh, g.kw = w.kw, g.sh = w.sh, g.sw = w.sw, g.top = w.top, g.left = w.left;
  g.dh = w.dh, g.dw = w.dw;
  return g;
}

void check_nchw(std::string_view op, const TensorType& x) {
  check_dtype(op, x.dtype, kFloatTypes);
  MF_CHECK(x.shape.size() == 4, InvalidArgument, op, ": x must be NCHW or NHWC (rank 4), got ",
           ir::shape_to_string(x.shape));
}

// True for data_format "NHWC", false for "NCHW".
bool channels_last(std::string_view op, const Attrs& attrs) {
  const std::string& format = ir::attr_string(attrs, "data_format", op);
  MF_CHECK(format == "NCHW" || format == "NHWC", InvalidArgument, op,
           ": data_format must be 'NCHW' or 'NHWC', got '", echo(format), "'");
  return format == "NHWC";
}

// The (N, C, H, W) sizes of an activation given in `channels_last` order, and back.
Shape nchw_sizes(const Shape& s, bool channels_last) {
  return channels_last ? Shape{s[0], s[3], s[1], s[2]} : s;
}
Shape in_format(const Shape& nchw, bool channels_last) {
  return channels_last ? Shape{nchw[0], nchw[2], nchw[3], nchw[1]} : nchw;
}

// Runs an NCHW float64 kernel on an NHWC node: x transposed in, y transposed out. oneDNN has no
// float64 kernels and the Eigen and loop paths read NCHW; float64 is for references and tests.
void run_nhwc_as_nchw(const ir::KernelContext& ctx, void (*nchw_kernel)(const ir::KernelContext&)) {
  const Shape x_nchw = nchw_sizes(ctx.inputs[0].type.shape, true);
  const Shape y_nchw = nchw_sizes(ctx.outputs[0].type.shape, true);
  std::vector<double> x(ir::num_elements(x_nchw)), y(ir::num_elements(y_nchw));
  transpose_activation(ctx.inputs[0].as<double>(), x.data(), x_nchw, true);
  std::vector<ir::TensorView> inputs(ctx.inputs.begin(), ctx.inputs.end());
  inputs[0] = {x.data(), {DType::kFloat64, x_nchw}};
  const ir::TensorView outputs[] = {{y.data(), {DType::kFloat64, y_nchw}}};
  Attrs attrs = ctx.attrs;
  attrs["data_format"] = std::string("NCHW");
  nchw_kernel(ir::KernelContext{inputs, outputs, attrs, ctx.op_name, ctx.deterministic});
  transpose_activation(y.data(), ctx.outputs[0].as<double>(), y_nchw, false);
}

// The reference's view of the same: an NHWC RefTensor as NCHW values, and back.
RefTensor ref_to_nchw(const RefTensor& t) {
  RefTensor out = ref_tensor(nchw_sizes(t.shape, true));
  transpose_activation(t.values.data(), out.values.data(), out.shape, true);
  return out;
}
RefTensor ref_to_nhwc(const RefTensor& t) {
  RefTensor out = ref_tensor(in_format(t.shape, true));
  transpose_activation(t.values.data(), out.values.data(), t.shape, false);
  return out;
}

ir::Attrs channels_last_attrs(ir::Attrs attrs) {
  attrs["data_format"] = std::string("NHWC");
  return attrs;
}

ir::Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding,
                     std::vector<int64_t> dilation, int64_t groups) {
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

ir::Attrs conv_window_attrs(const ir::Attrs& attrs) {
  ir::Attrs window;
  for (const char* name : {"stride", "padding", "dilation", "groups"})
    window[name] = attrs.at(name);
  return window;
}

}  // namespace mf::runtime::ops
