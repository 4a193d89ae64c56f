#pragma once
// mf::ops: one free function per op of the registry, for user code and nn layers. Each forwards to
// the dispatcher with typed attributes; the op's own file in runtime/ops/ defines what it does.
// ops::call reaches any registered op by name.

#include <source_location>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "ir/attribute.h"

namespace mf::ops {

using Loc = std::source_location;

// Any registered op by name; returns every output.
std::vector<Tensor> call(std::string_view op, const std::vector<Tensor>& inputs,
                         ir::Attrs attrs = {}, Loc where = Loc::current());

// Elementwise, numpy broadcasting.
Tensor add(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor sub(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor mul(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor div(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor pow(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor maximum(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor minimum(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor equal(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor less(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor greater(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, Loc where = Loc::current());
// minimum(maximum(x, lo), hi) in one pass (MindSpore's ops.clamp, ONNX Clip).
Tensor clip(const Tensor& x, const Tensor& lo, const Tensor& hi, Loc where = Loc::current());
Tensor neg(const Tensor& x, Loc where = Loc::current());
Tensor abs(const Tensor& x, Loc where = Loc::current());
Tensor exp(const Tensor& x, Loc where = Loc::current());
Tensor log(const Tensor& x, Loc where = Loc::current());
Tensor sqrt(const Tensor& x, Loc where = Loc::current());
Tensor rsqrt(const Tensor& x, Loc where = Loc::current());
Tensor square(const Tensor& x, Loc where = Loc::current());
Tensor relu(const Tensor& x, Loc where = Loc::current());
Tensor sigmoid(const Tensor& x, Loc where = Loc::current());
Tensor tanh(const Tensor& x, Loc where = Loc::current());
Tensor erf(const Tensor& x, Loc where = Loc::current());
Tensor gelu(const Tensor& x, bool tanh_approximation = true, Loc where = Loc::current());
Tensor cast(const Tensor& x, DType dtype, Loc where = Loc::current());
// A scalar of x's dtype, for expressions such as x * 1.5.
Tensor scalar(double value, DType dtype = DType::kFloat32);

// Linear algebra.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false,
              Loc where = Loc::current());
Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                    bool transpose_b = false, Loc where = Loc::current());
Tensor bias_add(const Tensor& x, const Tensor& bias, int64_t axis = -1, Loc where = Loc::current());

// Convolution and pooling, NCHW.
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
};
Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dOptions& options = {},
              Loc where = Loc::current());
struct Pool2dOptions {
  std::vector<int64_t> kernel_size = {2, 2};
  std::vector<int64_t> stride = {2, 2};
  std::vector<int64_t> padding = {0, 0};
};
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {}, Loc where = Loc::current());
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {}, Loc where = Loc::current());
Tensor global_avg_pool(const Tensor& x, Loc where = Loc::current());

// Reductions over axes (empty: all axes).
Tensor reduce_sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  Loc where = Loc::current());
Tensor reduce_mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                   Loc where = Loc::current());
Tensor reduce_max(const Tensor& x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  Loc where = Loc::current());
Tensor reduce_min(const Tensor& x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  Loc where = Loc::current());

// Normalization.
Tensor softmax(const Tensor& x, int64_t axis = -1, Loc where = Loc::current());
Tensor log_softmax(const Tensor& x, int64_t axis = -1, Loc where = Loc::current());
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  int64_t begin_norm_axis = -1, double epsilon = 1e-5, Loc where = Loc::current());
Tensor batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& variance, double epsilon = 1e-5, Loc where = Loc::current());

// Shapes.
Tensor reshape(const Tensor& x, std::vector<int64_t> shape, Loc where = Loc::current());
Tensor transpose(const Tensor& x, std::vector<int64_t> perm, Loc where = Loc::current());
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0, Loc where = Loc::current());
std::vector<Tensor> split(const Tensor& x, int64_t axis, int64_t num, Loc where = Loc::current());
Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> end,
             Loc where = Loc::current());
Tensor flatten(const Tensor& x, Loc where = Loc::current());
Tensor expand_dims(const Tensor& x, int64_t axis, Loc where = Loc::current());
Tensor squeeze(const Tensor& x, std::vector<int64_t> axes = {}, Loc where = Loc::current());
Tensor broadcast_to(const Tensor& x, std::vector<int64_t> shape, Loc where = Loc::current());
Tensor fill(std::vector<int64_t> shape, double value, DType dtype = DType::kFloat32,
            Loc where = Loc::current());
Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32, Loc where = Loc::current());
Tensor ones(std::vector<int64_t> shape, DType dtype = DType::kFloat32, Loc where = Loc::current());

// Writes the tensors to stdout, or appends them to print_file_path when set.
void print(const std::vector<Tensor>& xs, Loc where = Loc::current());

// Waits for every op submitted so far; rethrows a pending asynchronous error.
void sync();

}  // namespace mf::ops
