// cast(x) {dtype}: converts between any two dtypes as C++ does (float -> int truncates toward zero,
// anything -> Bool is x != 0, Bool -> number is 0 or 1).
//
// Not marked kElementwise: its output dtype comes from an attribute, which the attribute-free tile
// math of ElementwiseMath cannot express; fusion treats it as a cluster boundary.

#include <Eigen/Core>

#include <cmath>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

constexpr int64_t kChunk = 1 << 15;

template <typename From, typename To>
void cast_range(const From* in, To* out, int64_t n) {
  Eigen::Map<Eigen::Array<To, Eigen::Dynamic, 1>>(out, n) =
      Eigen::Map<const Eigen::Array<From, Eigen::Dynamic, 1>>(in, n).template cast<To>();
}

void cast_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& in = ctx.inputs[0];
  const ir::TensorView& out = ctx.outputs[0];
  ir::visit_dtype(in.type.dtype, [&](auto from) {
    using From = decltype(from);
    ir::visit_dtype(out.type.dtype, [&](auto to) {
      using To = decltype(to);
      const From* src = in.as<From>();
      To* dst = out.as<To>();
      parallel_for(in.size(), kChunk, [&](int64_t begin, int64_t end) {
        cast_range(src + begin, dst + begin, end - begin);
      });
    });
  });
}

double cast_value(double x, DType to) {
  switch (to) {
    case DType::kFloat32:
      return static_cast<double>(static_cast<float>(x));
    case DType::kFloat64:
      return x;
    case DType::kInt32:
    case DType::kInt64:
      return std::trunc(x);
    case DType::kBool:
      return x != 0.0 ? 1.0 : 0.0;
  }
  return x;
}

const ir::OpRegistration kCast =
    ir::define_op("cast")
        .arity(1)
        .attr("dtype", ir::AttrKind::kDType, std::nullopt, "the output dtype")
        .traits(ir::Trait::kPure)
        .infer([](std::span<const TensorType> inputs, const Attrs& attrs) {
          return std::vector<TensorType>{{ir::attr_dtype(attrs, "dtype", "cast"), inputs[0].shape}};
        })
        .kernel(cast_kernel)
        .reference([](std::span<const RefTensor> inputs, const Attrs& attrs) {
          const DType to = ir::attr_dtype(attrs, "dtype", "cast");
          RefTensor out = inputs[0];
          for (double& v : out.values) v = cast_value(v, to);
          return std::vector<RefTensor>{out};
        })
        .samples({
            sample({f32({3, 5})}, {{"dtype", DType::kInt32}}),
            sample({f32({7})}, {{"dtype", DType::kFloat64}}),
            sample({f32({2, 3})}, {{"dtype", DType::kBool}}),
            sample({f32({})}, {{"dtype", DType::kInt64}}),
            sample({f64({4})}, {{"dtype", DType::kFloat32}}),
            sample({boolean({6})}, {{"dtype", DType::kFloat32}}),
            sample({i32({6})}, {{"dtype", DType::kFloat64}}),
        })
        .doc("converts x to the dtype attribute (float -> int truncates toward zero)");

}  // namespace
}  // namespace mf::runtime::ops
