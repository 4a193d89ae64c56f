// det(x): the determinant of each square matrix in the last two axes of x (..., n, n), giving
// (...) (ONNX's Det, numpy.linalg.det). LU factorization with partial pivoting per matrix, in the
// input's precision; an empty (0 x 0) matrix has determinant 1. Float32 and Float64.

#include <cmath>
#include <utility>
#include <vector>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

std::vector<TensorType> infer_det(std::span<const TensorType> in, const Attrs&) {
  check_dtype("det", in[0].dtype, kFloatTypes);
  const Shape& s = in[0].shape;
  MF_CHECK(s.size() >= 2 && s[s.size() - 1] == s[s.size() - 2], InvalidArgument,
           "det: x must be square matrices (..., n, n), got ", ir::shape_to_string(s));
  return {{in[0].dtype, Shape(s.begin(), s.end() - 2)}};
}

template <typename T>
void det_typed(const ir::KernelContext& ctx) {
  const Shape& s = ctx.inputs[0].type.shape;
  const int64_t n = s.back();
  const int64_t count = ir::num_elements(ctx.outputs[0].type.shape);
  const T* x = ctx.inputs[0].as<T>();
  T* y = ctx.outputs[0].as<T>();
  parallel_for(count, grain_for(n * n * n), [&](int64_t begin, int64_t end) {
    std::vector<T> a(size_t(n * n));
    for (int64_t m = begin; m < end; ++m) {
      std::copy(x + m * n * n, x + (m + 1) * n * n, a.begin());
      T det = 1;
      for (int64_t k = 0; k < n && det != T(0); ++k) {
        int64_t pivot = k;
        for (int64_t i = k + 1; i < n; ++i) {
          if (std::abs(a[size_t(i * n + k)]) > std::abs(a[size_t(pivot * n + k)])) pivot = i;
        }
        if (a[size_t(pivot * n + k)] == T(0)) {
          det = 0;
          break;
        }
        if (pivot != k) {
          for (int64_t j = 0; j < n; ++j) std::swap(a[size_t(k * n + j)], a[size_t(pivot * n + j)]);
          det = -det;
        }
        const T d = a[size_t(k * n + k)];
        det *= d;
        for (int64_t i = k + 1; i < n; ++i) {
          const T f = a[size_t(i * n + k)] / d;
          for (int64_t j = k + 1; j < n; ++j) a[size_t(i * n + j)] -= f * a[size_t(k * n + j)];
        }
      }
      y[m] = det;
    }
  });
}

void det_kernel(const ir::KernelContext& ctx) {
  visit_float(ctx.outputs[0].type.dtype, [&](auto tag) { det_typed<decltype(tag)>(ctx); });
}

// Laplace expansion along the first row: exact arithmetic's definition, independent of the LU.
double laplace(const std::vector<double>& a, int64_t n) {
  if (n == 0) return 1;
  if (n == 1) return a[0];
  double sum = 0;
  std::vector<double> minor(size_t((n - 1) * (n - 1)));
  for (int64_t col = 0; col < n; ++col) {
    size_t at = 0;
    for (int64_t i = 1; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (j != col) minor[at++] = a[size_t(i * n + j)];
    sum += (col % 2 == 0 ? 1 : -1) * a[size_t(col)] * laplace(minor, n - 1);
  }
  return sum;
}

std::vector<RefTensor> det_reference(std::span<const RefTensor> in, const Attrs&) {
  const Shape& s = in[0].shape;
  const int64_t n = s.back();
  RefTensor out = ref_tensor(Shape(s.begin(), s.end() - 2));
  for (size_t m = 0; m < out.values.size(); ++m) {
    const auto first = in[0].values.begin() + std::ptrdiff_t(m * size_t(n * n));
    out.values[m] = laplace(std::vector<double>(first, first + n * n), n);
  }
  return {out};
}

const ir::OpRegistration kDet = ir::define_op("det")
                                    .arity(1)
                                    .traits(Trait::kPure)
                                    .infer(infer_det)
                                    .kernel(det_kernel)
                                    .reference(det_reference)
                                    .samples({
                                        sample({f32({3, 3})}),
                                        sample({f32({2, 4, 4})}),
                                        sample({f64({2, 3, 5, 5})}),
                                        sample({f32({1, 1})}),
                                        sample({f32({6, 6})}),
                                        sample({f32({2, 0, 0})}),
                                    })
                                    .tolerance(1e-4)
                                    .doc(
                                        "the determinant of each square matrix in x's last two "
                                        "axes (ONNX's Det)");

}  // namespace
}  // namespace mf::runtime::ops
