// cast(x) {dtype}: converts between any two dtypes as C++ does (float -> int truncates toward zero,
// anything -> Bool is x != 0, Bool -> number is 0 or 1). Where C++ leaves float -> int undefined,
// the result is defined here: NaN gives 0 and a value beyond the integer's range its nearest bound
// (numpy and PyTorch give INT_MIN on x86, as the instruction does; an undefined conversion may
// give anything once optimized, and a sanitizer stops on it).
//
// Not marked kElementwise: its output dtype comes from an attribute, which the attribute-free tile
// math of ElementwiseMath cannot express; fusion treats it as a cluster boundary.

#include <Eigen/Core>

#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

constexpr int64_t kChunk = 1 << 15;

template <typename From, typename To>
void cast_range(const From* in, To* out, int64_t n) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> &&
                !std::is_same_v<To, bool>) {
    // The bounds as From: To's max may not be representable (2^63 - 1 rounds up to 2^63), so the
    // upper test is >= the first value past it.
    constexpr From kLow = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From kPastHigh = -kLow;
    for (int64_t i = 0; i < n; ++i) {
      const From v = in[i];
      out[i] = v != v           ? To(0)
               : v <= kLow      ? std::numeric_limits<To>::min()
               : v >= kPastHigh ? std::numeric_limits<To>::max()
                                : static_cast<To>(v);
    }
  } else {
    Eigen::Map<Eigen::Array<To, Eigen::Dynamic, 1>>(out, n) =
        Eigen::Map<const Eigen::Array<From, Eigen::Dynamic, 1>>(in, n).template cast<To>();
  }
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
    case DType::kInt64: {
      if (std::isnan(x)) return 0.0;
      const double low = to == DType::kInt32 ? -2147483648.0 : -9223372036854775808.0;
      if (x <= low) return low;
      if (x >= -low) return to == DType::kInt32 ? 2147483647.0 : 9223372036854775807.0;
      return std::trunc(x);
    }
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
        .doc("converts x to the dtype attribute (float -> int truncates toward zero)")
        // Between float types dout is cast back; through an integer or Bool the result is flat
        // (and the engine treats a non-float output as a constant): no gradient.
        .backward({}, [](ir::GradBuilder& b) {
          const DType from = b.input_type(0).dtype, to = b.output_type(0).dtype;
          if (!b.wants_grad(0) || !ir::is_floating(from) || !ir::is_floating(to)) return;
          b.set_grad(0, from == to ? b.dout(0) : b.op("cast", {b.dout(0)}, {{"dtype", from}}));
        });

}  // namespace
}  // namespace mf::runtime::ops
