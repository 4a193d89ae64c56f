// ONNX import: linear algebra (MatMul, Gemm), convolution, pooling, normalization and softmax.

#include "engine/io/onnx/importer_impl.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_nn_converters(ConverterTable& table) {
  add_converters(table, {
                            {"AveragePool", &Importer::convert_pool},
                            {"BatchNormalization", &Importer::convert_batch_norm},
                            {"Conv", &Importer::convert_conv},
                            {"ConvTranspose", &Importer::convert_conv_transpose},
                            {"Gemm", &Importer::convert_gemm},
                            {"GlobalAveragePool", &Importer::convert_global_pool},
                            {"GlobalMaxPool", &Importer::convert_global_pool},
                            {"LayerNormalization", &Importer::convert_layer_norm},
                            {"LogSoftmax", &Importer::convert_softmax},
                            {"MatMul", &Importer::convert_matmul},
                            {"MaxPool", &Importer::convert_pool},
                            {"Softmax", &Importer::convert_softmax},
                        });
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

// numpy.matmul: 1-D operands are promoted and the added axis dropped again; stacks broadcast.
Value Importer::matmul(Value a, Value b) {
  const Shape sa = shape_of(a), sb = shape_of(b);
  MF_CHECK(!sa.empty() && !sb.empty(), InvalidArgument, describe(),
           ": MatMul operands must have rank >= 1, got ", ir::shape_to_string(sa), " and ",
           ir::shape_to_string(sb));
  if (sa.size() == 1 || sb.size() == 1) {
    const Value a2 = sa.size() == 1 ? reshape(a, {1, sa[0]}) : a;
    const Value b2 = sb.size() == 1 ? reshape(b, {sb[0], 1}) : b;
    const Value y = matmul(a2, b2);
    Shape out = shape_of(y);
    if (sb.size() == 1) out.pop_back();
    if (sa.size() == 1) out.erase(out.end() - (sb.size() == 1 ? 1 : 2));
    return reshape(y, out);
  }
  if (sa.size() == 2 && sb.size() == 2) return emit("matmul", {a, b});
  if (sb.size() == 2) {
    // A stack times one matrix is one large matrix product.
    const Value y = emit("matmul", {reshape(a, {-1, sa.back()}), b});
    Shape out(sa.begin(), sa.end() - 1);
    out.push_back(sb[1]);
    return reshape(y, out);
  }
  return emit("batch_matmul", {a, b});
}

void Importer::convert_matmul() {
  set_output(0, matmul(input(0), input(1)));
}

void Importer::convert_gemm() {
  Value a = input(0), b = input(1);
  MF_CHECK(rank_of(a) == 2 && rank_of(b) == 2, InvalidArgument, describe(),
           ": Gemm takes matrices, got ", ir::shape_to_string(shape_of(a)), " and ",
           ir::shape_to_string(shape_of(b)));
  const DType t = a.type().dtype;
  Value y = emit(
      "matmul", {a, b},
      {{"transpose_a", attr_int("transA", 0) != 0}, {"transpose_b", attr_int("transB", 0) != 0}});
  const double alpha = attr_float("alpha", 1.0), beta = attr_float("beta", 1.0);
  if (alpha != 1.0) y = emit("mul", {y, scalar(alpha, t)});
  if (has_input(2) && beta != 0.0) {
    Value c = input(2);
    if (beta != 1.0) c = emit("mul", {c, scalar(beta, t)});
    if (rank_of(c) == 1 && shape_of(c)[0] == shape_of(y)[1] && shape_of(y)[1] != 1) {
      y = emit("bias_add", {y, c});
    } else {
      y = emit("add", {y, c});
    }
  }
  set_output(0, y);
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling

Importer::Window Importer::window(const Shape& x, const std::vector<int64_t>& kernel,
                                  bool ceil_mode) {
  const size_t n = kernel.size();
  Window w;
  w.kernel = kernel;
  w.stride = attr_ints("strides", std::vector<int64_t>(n, 1));
  w.dilation = attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  MF_CHECK(w.stride.size() == n && w.dilation.size() == n && pads.size() == 2 * n, InvalidArgument,
           describe(), ": strides ", w.stride.size(), ", dilations ", w.dilation.size(),
           " and pads ", pads.size(), " values do not fit a ", n, "-D kernel");
  for (size_t d = 0; d < n; ++d) {
    MF_CHECK(kernel[d] >= 1 && w.stride[d] >= 1 && w.dilation[d] >= 1, InvalidArgument, describe(),
             ": kernel, strides and dilations must be >= 1");
    // Beyond the largest tensor no window fits: bounding them keeps the arithmetic below (and the
    // op's own) from wrapping around 64 bits.
    const std::optional<int64_t> stretched = ir::checked_mul(kernel[d] - 1, w.dilation[d]);
    MF_CHECK(stretched.has_value() && *stretched < ir::kMaxTensorElements &&
                 w.stride[d] <= ir::kMaxTensorElements,
             InvalidArgument, describe(), ": kernel ", ir::shape_to_string(kernel), ", dilations ",
             ir::shape_to_string(w.dilation), " and strides ", ir::shape_to_string(w.stride),
             " give a window larger than 2^40, the largest tensor supported");
  }
  for (int64_t p : pads) {
    MF_CHECK(p <= ir::kMaxTensorElements, InvalidArgument, describe(), ": pads ",
             ir::shape_to_string(pads), " exceed 2^40, the largest tensor supported");
  }
  const std::string auto_pad = attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x[2 + d], span = (kernel[d] - 1) * w.dilation[d] + 1;
    int64_t& begin = pads[d];
    int64_t& end = pads[n + d];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + w.stride[d] - 1) / w.stride[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[d] + span - in);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    } else {
      MF_CHECK(auto_pad == "NOTSET", InvalidArgument, describe(), ": auto_pad '", auto_pad,
               "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    MF_CHECK(begin >= 0 && end >= 0, InvalidArgument, describe(), ": pads must be >= 0");
    if (ceil_mode) {
      // The last window may hang over the end: pad the end so the floor rule gives the ceiling.
      const int64_t padded = in + begin + end;
      int64_t out = (padded - span + w.stride[d] - 1) / w.stride[d] + 1;
      if ((out - 1) * w.stride[d] >= in + begin) --out;  // a window must start inside
      end += std::max<int64_t>(0, (out - 1) * w.stride[d] + span - padded);
    }
  }
  if (n == 1) {
    // Lifted to 2-D as (N, C, 1, L).
    w.kernel = {1, kernel[0]};
    w.stride = {1, w.stride[0]};
    w.dilation = {1, w.dilation[0]};
    w.pads = {0, 0, pads[0], pads[1]};
  } else {
    w.pads = {pads[0], pads[2], pads[1], pads[3]};
  }
  return w;
}

// A 1-D input (N, C, L) is lifted to (N, C, 1, L) and the result lowered again.
void Importer::convert_conv() {
  Value x = input(0), w = input(1);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank != 3 && rank != 4) {
    unsupported("only 1-D and 2-D convolutions (inputs of rank 3 or 4) are supported, got x " +
                ir::shape_to_string(shape_of(x)));
  }
  MF_CHECK(rank_of(w) == rank, InvalidArgument, describe(), ": weight ",
           ir::shape_to_string(shape_of(w)), " must have the rank of x ",
           ir::shape_to_string(shape_of(x)));
  const Shape ws = shape_of(w);
  const std::vector<int64_t> kernel =
      attr_ints("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end()));
  MF_CHECK(kernel == std::vector<int64_t>(ws.begin() + 2, ws.end()), InvalidArgument, describe(),
           ": kernel_shape ", ir::shape_to_string(kernel), " disagrees with the weight ",
           ir::shape_to_string(ws));
  const Window win = window(shape_of(x), kernel, false);
  if (rank == 3) {
    const Shape xs = shape_of(x);
    x = reshape(x, {xs[0], xs[1], 1, xs[2]});
    w = reshape(w, {ws[0], ws[1], 1, ws[2]});
  }
  std::vector<Value> inputs = {x, w};
  if (has_input(2)) inputs.push_back(input(2));
  Value y = emit("conv2d", inputs,
                 {{"stride", win.stride},
                  {"padding", win.pads},
                  {"dilation", win.dilation},
                  {"groups", attr_int("group", 1)}});
  if (rank == 3) {
    const Shape ys = shape_of(y);
    y = reshape(y, {ys[0], ys[1], ys[3]});
  }
  set_output(0, y);
}

// ConvTranspose: conv_transpose2d, a 1-D input lifted to 2-D as Conv's is. The padding is `pads`,
// or what `output_shape` or auto_pad SAME_* asks for, split as the ONNX spec says (SAME_UPPER
// puts the smaller half first, everything else the larger).
void Importer::convert_conv_transpose() {
  Value x = input(0), w = input(1);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank != 3 && rank != 4) {
    unsupported(
        "only 1-D and 2-D transposed convolutions (inputs of rank 3 or 4) are supported, "
        "got x " +
        ir::shape_to_string(shape_of(x)));
  }
  MF_CHECK(rank_of(w) == rank, InvalidArgument, describe(), ": weight ",
           ir::shape_to_string(shape_of(w)), " must have the rank of x ",
           ir::shape_to_string(shape_of(x)));
  const Shape xs = shape_of(x), ws = shape_of(w);
  const size_t n = size_t(rank - 2);
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  MF_CHECK(attr_ints("kernel_shape", kernel) == kernel, InvalidArgument, describe(),
           ": kernel_shape disagrees with the weight ", ir::shape_to_string(ws));
  const std::vector<int64_t> stride = attr_ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> dilation = attr_ints("dilations", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> extra = attr_ints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> pads = attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  const std::vector<int64_t> output_shape = attr_ints("output_shape", {});
  MF_CHECK(stride.size() == n && dilation.size() == n && extra.size() == n &&
               pads.size() == 2 * n && (output_shape.empty() || output_shape.size() == n),
           InvalidArgument, describe(),
           ": strides, dilations, output_padding, pads or output_shape "
           "do not fit a ",
           n, "-D kernel");
  for (size_t d = 0; d < n; ++d) {
    for (int64_t v : {stride[d], dilation[d], kernel[d]}) {
      MF_CHECK(v >= 1 && v <= ir::kMaxTensorElements, InvalidArgument, describe(),
               ": kernel, strides and dilations must be 1 to 2^40");
    }
    for (int64_t v : {extra[d], pads[d], pads[n + d]}) {
      MF_CHECK(v >= 0 && v <= ir::kMaxTensorElements, InvalidArgument, describe(),
               ": pads and output_padding must be 0 to 2^40");
    }
  }
  const std::string auto_pad = attr_string("auto_pad", "NOTSET");
  MF_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" ||
               auto_pad == "SAME_LOWER",
           InvalidArgument, describe(), ": auto_pad '", echo(auto_pad, 40),
           "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  if (auto_pad == "VALID") std::fill(pads.begin(), pads.end(), 0);
  std::vector<int64_t> more = extra;
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t d = 0; d < n; ++d) {
      const int64_t in = xs[2 + d];
      // Each factor is at most 2^40, so a product can pass int64: checked.
      const std::optional<int64_t> strided = ir::checked_mul(stride[d], in - 1);
      const std::optional<int64_t> span = ir::checked_mul(kernel[d] - 1, dilation[d]);
      MF_CHECK(
          strided && span && *strided < ir::kMaxTensorElements && *span < ir::kMaxTensorElements,
          InvalidArgument, describe(), ": the full output of x ", ir::shape_to_string(xs),
          " with these strides, kernel and dilations exceeds 2^40");
      const int64_t full = *strided + extra[d] + *span + 1;
      const int64_t target = output_shape.empty() ? in * stride[d] : output_shape[d];
      const int64_t total = full - target;
      // The spec's halves, rounded down as in its Python reference.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      int64_t begin = auto_pad == "SAME_UPPER" ? half : total - half;
      int64_t end = total - begin;
      if (begin < 0) {
        unsupported("output_shape " + ir::shape_to_string(output_shape) +
                    " extends the output before its first position; export with pads instead");
      }
      // A negative end extends the output: positions nothing reaches, as output_padding's.
      if (end < 0) {
        more[d] += -end;
        end = 0;
      }
      pads[d] = begin;
      pads[n + d] = end;
    }
  }
  ir::Attrs attrs = {{"groups", attr_int("group", 1)}};
  if (n == 1) {
    x = reshape(x, {xs[0], xs[1], 1, xs[2]});
    w = reshape(w, {ws[0], ws[1], 1, ws[2]});
    attrs["stride"] = std::vector<int64_t>{1, stride[0]};
    attrs["dilation"] = std::vector<int64_t>{1, dilation[0]};
    attrs["output_padding"] = std::vector<int64_t>{0, more[0]};
    attrs["padding"] = std::vector<int64_t>{0, 0, pads[0], pads[1]};
  } else {
    attrs["stride"] = stride;
    attrs["dilation"] = dilation;
    attrs["output_padding"] = more;
    attrs["padding"] = std::vector<int64_t>{pads[0], pads[2], pads[1], pads[3]};
  }
  std::vector<Value> inputs = {x, w};
  if (has_input(2)) inputs.push_back(input(2));
  Value y = emit("conv_transpose2d", inputs, attrs);
  if (n == 1) {
    const Shape ys = shape_of(y);
    y = reshape(y, {ys[0], ys[1], ys[3]});
  }
  set_output(0, y);
}

void Importer::convert_pool() {
  const bool is_max = node_->op_type() == "MaxPool";
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank != 3 && rank != 4) {
    unsupported("only 1-D and 2-D pooling (inputs of rank 3 or 4) is supported, got x " +
                ir::shape_to_string(shape_of(x)));
  }
  if (is_max) require_unused_outputs_from(1, "MaxPool's Indices output is not supported");
  const AttributeProto* k = find_attr("kernel_shape");
  MF_CHECK(k != nullptr, InvalidArgument, describe(), " has no kernel_shape attribute");
  const std::vector<int64_t> kernel = attr_ints("kernel_shape", {});
  MF_CHECK(int64_t(kernel.size()) == rank - 2, InvalidArgument, describe(), ": kernel_shape ",
           ir::shape_to_string(kernel), " does not fit x ", ir::shape_to_string(shape_of(x)));
  const bool ceil_mode = attr_int("ceil_mode", 0) != 0;
  const bool include_pad = attr_int("count_include_pad", 0) != 0;
  Window win = window(shape_of(x), kernel, false);
  if (win.dilation != std::vector<int64_t>{1, 1}) unsupported("dilated pooling is not supported");
  if (ceil_mode) {
    const Window ceiled = window(shape_of(x), kernel, true);
    if (!is_max && include_pad && ceiled.pads != win.pads) {
      unsupported(
          "ceil_mode=1 with count_include_pad=1 where the last window hangs over the "
          "end is not supported; export with ceil_mode=0 or count_include_pad=0");
    }
    win = ceiled;
  }
  if (rank == 3) {
    const Shape xs = shape_of(x);
    x = reshape(x, {xs[0], xs[1], 1, xs[2]});
  }
  ir::Attrs attrs = {{"kernel", win.kernel}, {"stride", win.stride}, {"padding", win.pads}};
  if (!is_max) attrs["count_include_pad"] = include_pad;
  Value y = emit(is_max ? "max_pool2d" : "avg_pool2d", {x}, attrs);
  if (rank == 3) {
    const Shape ys = shape_of(y);
    y = reshape(y, {ys[0], ys[1], ys[3]});
  }
  set_output(0, y);
}

void Importer::convert_global_pool() {
  Value x = input(0);
  require_float(x, "x");
  MF_CHECK(rank_of(x) >= 3, InvalidArgument, describe(), ": x must be (N, C, spatial...), got ",
           ir::shape_to_string(shape_of(x)));
  if (node_->op_type() == "GlobalAveragePool") {
    set_output(0, emit("global_avg_pool", {x}));
    return;
  }
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < rank_of(x); ++d) axes.push_back(d);
  set_output(0, emit("reduce_max", {x}, {{"axes", axes}, {"keep_dims", true}}));
}

// Inference only: training_mode (opset 14) must be 0, and the outputs past Y (the running or saved
// statistics, whichever the opset names) must be unused. Before opset 9, spatial=0 normalizes each
// activation on its own: the parameters then have x's shape without the batch axis.
void Importer::convert_batch_norm() {
  if (attr_int("training_mode", 0) != 0) {
    unsupported("training_mode=1 is not supported; export the model in eval mode");
  }
  require_unused_outputs_from(1, "the running statistics outputs exist only in training mode");
  Value x = input(0);
  require_float(x, "x");
  const DType t = x.type().dtype;
  std::vector<Value> params = {input(1), input(2), input(3), input(4)};  // scale, B, mean, var
  for (Value& p : params) {
    // From opset 15 scale and B, and mean and var, may each have a type of their own.
    if (p.type().dtype != t) p = emit("cast", {p}, {{"dtype", t}});
  }
  const double epsilon = attr_float("epsilon", 1e-5);
  if (opset_ < 9 && attr_int("spatial", 1) == 0 && rank_of(x) >= 2 && rank_of(params[0]) > 1) {
    const Shape activation(shape_of(x).begin() + 1, shape_of(x).end());
    for (Value p : params) {
      MF_CHECK(shape_of(p) == activation, InvalidArgument, describe(),
               ": with spatial=0 scale, B, mean and var must have shape ",
               ir::shape_to_string(activation), " (x ", ir::shape_to_string(shape_of(x)),
               " without its batch axis), got ", ir::shape_to_string(shape_of(p)));
    }
    const Value std_dev = emit("sqrt", {emit("add", {params[3], scalar(epsilon, t)})});
    const Value normalized = emit("div", {emit("sub", {x, params[2]}), std_dev});
    set_output(0, emit("add", {emit("mul", {normalized, params[0]}), params[1]}));
    return;
  }
  set_output(0, emit("batch_norm", {x, params[0], params[1], params[2], params[3]},
                     {{"epsilon", epsilon}}));
}

void Importer::convert_softmax() {
  const std::string op = node_->op_type() == "Softmax" ? "softmax" : "log_softmax";
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank == 0) unsupported("x must have rank >= 1");
  if (opset_ >= 13) {
    set_output(0, emit(op, {x}, {{"axis", axis_attr("axis", -1, rank)}}));
    return;
  }
  // Before opset 13 the input is coerced to 2-D at axis and normalized over the whole tail.
  const int64_t axis = axis_attr("axis", 1, rank);
  if (axis == rank - 1) {
    set_output(0, emit(op, {x}, {{"axis", int64_t{-1}}}));
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape_of(x)[d];
  const Shape original = shape_of(x);
  const Value y = emit(op, {reshape(x, {outer, inner})}, {{"axis", int64_t{-1}}});
  set_output(0, reshape(y, original));
}

// Y by the layer_norm op; the outputs Mean and InvStdDev (x's shape with the normalized axes 1, of
// stash_type, FLOAT by default), when used, by the ops layer_norm expands to, in its order: mean,
// centre, mean of squares, 1 / sqrt(var + epsilon). With a stash_type other than x's type the
// statistics are computed from x cast to it, as ONNX's stage one is.
void Importer::convert_layer_norm() {
  Value x = input(0);
  require_float(x, "x");
  const int64_t rank = rank_of(x);
  if (rank == 0) unsupported("x must have rank >= 1");
  const int64_t axis = axis_attr("axis", -1, rank);
  const double epsilon = attr_float("epsilon", 1e-5);
  const Shape norm(shape_of(x).begin() + axis, shape_of(x).end());
  auto fit = [&](Value v) {
    if (shape_of(v) == norm) return v;
    return emit("broadcast_to", {v}, {{"shape", norm}});
  };
  const Value gamma = fit(input(1));
  const Value beta = has_input(2)
                         ? fit(input(2))
                         : emit("broadcast_to", {scalar(0, x.type().dtype)}, {{"shape", norm}});
  set_output(
      0, emit("layer_norm", {x, gamma, beta}, {{"begin_norm_axis", axis}, {"epsilon", epsilon}}));
  if (!output_used(1) && !output_used(2)) return;
  const int64_t stash_type = attr_int("stash_type", 1);
  const std::optional<DType> stash = to_dtype(int32_t(stash_type));
  if (!stash || !ir::is_floating(*stash)) {
    unsupported("stash_type " + onnx_type_name(int32_t(stash_type)) +
                " for the Mean and InvStdDev outputs; FLOAT or DOUBLE are supported");
  }
  const Value xs = *stash == x.type().dtype ? x : emit("cast", {x}, {{"dtype", *stash}});
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  const ir::Attrs kept = {{"axes", axes}, {"keep_dims", true}};
  const Value mean = emit("reduce_mean", {xs}, kept);
  set_output(1, mean);
  if (!output_used(2)) return;
  const Value centred = emit("sub", {xs, mean});
  const Value var = emit("reduce_mean", {emit("mul", {centred, centred})}, kept);
  const Value std_dev = emit("sqrt", {emit("add", {var, scalar(epsilon, *stash)})});
  set_output(2, emit("div", {scalar(1, *stash), std_dev}));
}

}  // namespace mf::onnx::detail
