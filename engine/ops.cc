#include "engine/ops.h"

#include "engine/eager/dispatch.h"

namespace mf::ops {
namespace {

using ir::Attrs;
using Ints = std::vector<int64_t>;

Tensor one(std::string_view op, std::initializer_list<Tensor> inputs, Attrs attrs, Loc where) {
  std::vector<Tensor> outputs =
      engine::call_op(op, std::vector<Tensor>(inputs), std::move(attrs), where);
  MF_CHECK(outputs.size() == 1, Internal, op, " returned ", outputs.size(),
           " outputs where one was expected");
  return outputs.front();
}

}  // namespace

std::vector<Tensor> call(std::string_view op, const std::vector<Tensor>& inputs, ir::Attrs attrs,
                         Loc where) {
  return engine::call_op(op, inputs, std::move(attrs), where);
}

Tensor add(const Tensor& a, const Tensor& b, Loc w) {
  return one("add", {a, b}, {}, w);
}
Tensor sub(const Tensor& a, const Tensor& b, Loc w) {
  return one("sub", {a, b}, {}, w);
}
Tensor mul(const Tensor& a, const Tensor& b, Loc w) {
  return one("mul", {a, b}, {}, w);
}
Tensor div(const Tensor& a, const Tensor& b, Loc w) {
  return one("div", {a, b}, {}, w);
}
Tensor pow(const Tensor& a, const Tensor& b, Loc w) {
  return one("pow", {a, b}, {}, w);
}
Tensor maximum(const Tensor& a, const Tensor& b, Loc w) {
  return one("maximum", {a, b}, {}, w);
}
Tensor minimum(const Tensor& a, const Tensor& b, Loc w) {
  return one("minimum", {a, b}, {}, w);
}
Tensor equal(const Tensor& a, const Tensor& b, Loc w) {
  return one("equal", {a, b}, {}, w);
}
Tensor less(const Tensor& a, const Tensor& b, Loc w) {
  return one("less", {a, b}, {}, w);
}
Tensor greater(const Tensor& a, const Tensor& b, Loc w) {
  return one("greater", {a, b}, {}, w);
}
Tensor select(const Tensor& c, const Tensor& a, const Tensor& b, Loc w) {
  return one("select", {c, a, b}, {}, w);
}
Tensor clip(const Tensor& x, const Tensor& lo, const Tensor& hi, Loc w) {
  return one("clip", {x, lo, hi}, {}, w);
}
Tensor neg(const Tensor& x, Loc w) {
  return one("neg", {x}, {}, w);
}
Tensor abs(const Tensor& x, Loc w) {
  return one("abs", {x}, {}, w);
}
Tensor exp(const Tensor& x, Loc w) {
  return one("exp", {x}, {}, w);
}
Tensor log(const Tensor& x, Loc w) {
  return one("log", {x}, {}, w);
}
Tensor sqrt(const Tensor& x, Loc w) {
  return one("sqrt", {x}, {}, w);
}
Tensor rsqrt(const Tensor& x, Loc w) {
  return one("rsqrt", {x}, {}, w);
}
Tensor square(const Tensor& x, Loc w) {
  return one("square", {x}, {}, w);
}
Tensor relu(const Tensor& x, Loc w) {
  return one("relu", {x}, {}, w);
}
Tensor sigmoid(const Tensor& x, Loc w) {
  return one("sigmoid", {x}, {}, w);
}
Tensor tanh(const Tensor& x, Loc w) {
  return one("tanh", {x}, {}, w);
}
Tensor erf(const Tensor& x, Loc w) {
  return one("erf", {x}, {}, w);
}
Tensor gelu(const Tensor& x, bool tanh_approximation, Loc w) {
  return one(tanh_approximation ? "gelu_tanh" : "gelu_erf", {x}, {}, w);
}
Tensor cast(const Tensor& x, DType dtype, Loc w) {
  return one("cast", {x}, {{"dtype", dtype}}, w);
}
Tensor scalar(double value, DType dtype) {
  return Tensor::full({}, value, dtype);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, Loc w) {
  return one("matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}}, w);
}
Tensor batch_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, Loc w) {
  return one("batch_matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}}, w);
}
Tensor bias_add(const Tensor& x, const Tensor& bias, int64_t axis, Loc w) {
  return one("bias_add", {x, bias}, {{"axis", axis}}, w);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dOptions& o, Loc w) {
  return one("conv2d", {x, weight},
             {{"stride", o.stride},
              {"padding", o.padding},
              {"dilation", o.dilation},
              {"groups", o.groups}},
             w);
}
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& o, Loc w) {
  return one("max_pool2d", {x},
             {{"kernel", o.kernel_size}, {"stride", o.stride}, {"padding", o.padding}}, w);
}
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& o, Loc w) {
  return one("avg_pool2d", {x},
             {{"kernel", o.kernel_size}, {"stride", o.stride}, {"padding", o.padding}}, w);
}
Tensor global_avg_pool(const Tensor& x, Loc w) {
  return one("global_avg_pool", {x}, {}, w);
}

Tensor reduce_sum(const Tensor& x, Ints axes, bool keep, Loc w) {
  return one("reduce_sum", {x}, {{"axes", std::move(axes)}, {"keep_dims", keep}}, w);
}
Tensor reduce_mean(const Tensor& x, Ints axes, bool keep, Loc w) {
  return one("reduce_mean", {x}, {{"axes", std::move(axes)}, {"keep_dims", keep}}, w);
}
Tensor reduce_max(const Tensor& x, Ints axes, bool keep, Loc w) {
  return one("reduce_max", {x}, {{"axes", std::move(axes)}, {"keep_dims", keep}}, w);
}
Tensor reduce_min(const Tensor& x, Ints axes, bool keep, Loc w) {
  return one("reduce_min", {x}, {{"axes", std::move(axes)}, {"keep_dims", keep}}, w);
}

Tensor softmax(const Tensor& x, int64_t axis, Loc w) {
  return one("softmax", {x}, {{"axis", axis}}, w);
}
Tensor log_softmax(const Tensor& x, int64_t axis, Loc w) {
  return one("log_softmax", {x}, {{"axis", axis}}, w);
}
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t begin_norm_axis,
                  double epsilon, Loc w) {
  return one("layer_norm", {x, gamma, beta},
             {{"begin_norm_axis", begin_norm_axis}, {"epsilon", epsilon}}, w);
}
Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& variance, double epsilon, Loc w) {
  return one("batch_norm", {x, scale, bias, mean, variance}, {{"epsilon", epsilon}}, w);
}

Tensor reshape(const Tensor& x, Ints shape, Loc w) {
  return one("reshape", {x}, {{"shape", std::move(shape)}}, w);
}
Tensor transpose(const Tensor& x, Ints perm, Loc w) {
  return one("transpose", {x}, {{"perm", std::move(perm)}}, w);
}
Tensor concat(const std::vector<Tensor>& xs, int64_t axis, Loc w) {
  std::vector<Tensor> outputs = engine::call_op("concat", xs, {{"axis", axis}}, w);
  return outputs.front();
}
std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t num, Loc w) {
  return engine::call_op("split", std::vector<Tensor>{x}, {{"axis", axis}, {"num", num}}, w);
}
Tensor slice(const Tensor& x, Ints begin, Ints end, Loc w) {
  return one("slice", {x}, {{"begin", std::move(begin)}, {"end", std::move(end)}}, w);
}
Tensor flatten(const Tensor& x, Loc w) {
  return one("flatten", {x}, {}, w);
}
Tensor expand_dims(const Tensor& x, int64_t axis, Loc w) {
  return one("expand_dims", {x}, {{"axis", axis}}, w);
}
Tensor squeeze(const Tensor& x, Ints axes, Loc w) {
  return one("squeeze", {x}, {{"axes", std::move(axes)}}, w);
}
Tensor broadcast_to(const Tensor& x, Ints shape, Loc w) {
  return one("broadcast_to", {x}, {{"shape", std::move(shape)}}, w);
}
Tensor fill(Ints shape, double value, DType dtype, Loc w) {
  return one("fill", {}, {{"shape", std::move(shape)}, {"value", value}, {"dtype", dtype}}, w);
}
Tensor zeros(Ints shape, DType dtype, Loc w) {
  return one("zeros", {}, {{"shape", std::move(shape)}, {"dtype", dtype}}, w);
}
Tensor ones(Ints shape, DType dtype, Loc w) {
  return one("ones", {}, {{"shape", std::move(shape)}, {"dtype", dtype}}, w);
}

void print(const std::vector<Tensor>& xs, Loc w) {
  engine::call_op("print", xs, {}, w);
}

void sync() {
  engine::sync();
}

}  // namespace mf::ops
