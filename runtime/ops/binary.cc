// Binary elementwise ops with numpy broadcasting. Inputs share one dtype (a cast is explicit in the
// graph); the output has the broadcast shape.

#include <algorithm>
#include <cmath>

#include "runtime/ops/elementwise_kernel.h"
#include "runtime/ops/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr Trait kBinary = Trait::kElementwise | Trait::kBroadcast | Trait::kPure;

std::vector<ir::OpSample> binary_samples(double low = -2.0, double high = 2.0) {
  return {
      sample({f32({3, 5}), f32({3, 5})}, {}, low, high),
      sample({f32({3, 5}), f32({5})}, {}, low, high),
      sample({f32({4, 1, 3}), f32({2, 3})}, {}, low, high),
      sample({f32({}), f32({3, 5})}, {}, low, high),
      sample({f32({3, 1}), f32({1, 4})}, {}, low, high),
      sample({f32({}), f32({})}, {}, low, high),
      // Several parallel chunks and tiles, with a broadcast operand gathered per tile.
      sample({f32({3, 40000}), f32({3, 1})}, {}, low, high),
  };
}

ir::OpBuilder declare(std::string name, const ir::ElementwiseMath& math,
                      double (*reference)(double, double), std::string doc,
                      Trait extra = Trait::kNone, double low = -2.0, double high = 2.0) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(2)
      .traits(kBinary | extra)
      .infer(infer_elementwise(name, math))
      .kernel(elementwise_kernel(math))
      .elementwise(math)
      .reference(ref_binary(reference))
      .samples(binary_samples(low, high))
      .doc(std::move(doc));
  return b;
}

// add, sub, mul, div, maximum and minimum over float32 are also emitted as single AVX-512
// instructions by runtime/fused_jit.cc, in the operand order Eigen uses for these functors; change
// a functor here and tests/runtime/fused_jit_test.cc shows where the two part.
const ir::ElementwiseMath kAddMath = make_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a + b; });
const ir::ElementwiseMath kSubMath = make_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a - b; });
const ir::ElementwiseMath kMulMath = make_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a * b; });
const ir::ElementwiseMath kDivMath =
    make_math<2, float, double>([](const auto& a, const auto& b) { return a / b; });
const ir::ElementwiseMath kPowMath =
    make_math<2, float, double>([](const auto& a, const auto& b) { return a.pow(b); });
const ir::ElementwiseMath kMaximumMath = make_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a.max(b); });
const ir::ElementwiseMath kMinimumMath = make_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a.min(b); });

const ir::OpRegistration kAdd = declare(
    "add", kAddMath, [](double a, double b) { return a + b; }, "a + b", Trait::kCommutative);
const ir::OpRegistration kSub = declare(
    "sub", kSubMath, [](double a, double b) { return a - b; }, "a - b");
const ir::OpRegistration kMul = declare(
    "mul", kMulMath, [](double a, double b) { return a * b; }, "a * b", Trait::kCommutative);
// Divisors are kept away from zero in the samples: near a pole float32 and double differ by more
// than any tolerance says anything about.
const ir::OpRegistration kDiv = declare(
    "div", kDivMath, [](double a, double b) { return a / b; }, "a / b (true division, floats only)",
    Trait::kNone, 0.5, 2.0);
const ir::OpRegistration kPow = declare(
    "pow", kPowMath, [](double a, double b) { return std::pow(a, b); },
    "a ^ b; a must be positive unless b is integral", Trait::kNone, 0.25, 2.0);
const ir::OpRegistration kMaximum = declare(
    "maximum", kMaximumMath, [](double a, double b) { return std::max(a, b); },
    "elementwise max(a, b)", Trait::kCommutative);
const ir::OpRegistration kMinimum = declare(
    "minimum", kMinimumMath, [](double a, double b) { return std::min(a, b); },
    "elementwise min(a, b)", Trait::kCommutative);

}  // namespace
}  // namespace mf::runtime::ops
