// Binary elementwise ops with numpy broadcasting. Inputs share one dtype (a cast is explicit in the
// graph); the output has the broadcast shape.

#include <algorithm>
#include <cmath>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "runtime/kernels/elementwise_kernel.h"
#include "runtime/kernels/reference.h"

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

// clip(x, lo, hi) = minimum(maximum(x, lo), hi), broadcasting all three (ONNX Clip, ReLU6,
// MindSpore's clamp): one kernel and one pass over memory where the two ops took two. Its tile math
// is the two ops' own tile math run back to back on the tile, so it gives their bits whatever the
// operands, NaN included; the fused-kernel generator emits it as those two instructions.
template <DType kType>
void clip_tile(const void* const* in, uint32_t scalars, void* out, int64_t n) {
#if defined(__AVX512F__)
  // ReLU6's form (float32 x, scalar bounds) in one pass: the very instructions of the two tile
  // functions, in their operand order (Eigen's pmax(a, b) is vmaxps(b, a)), each element once.
  // The two passes took a quarter more over mobilenet_v2's clips op by op (the second read the
  // tile back).
  if constexpr (kType == DType::kFloat32) {
    if ((scalars & 7u) == 6u) {
      const float* x = static_cast<const float*>(in[0]);
      float* o = static_cast<float*>(out);
      const __m512 lo = _mm512_set1_ps(*static_cast<const float*>(in[1]));
      const __m512 hi = _mm512_set1_ps(*static_cast<const float*>(in[2]));
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(o + i, _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_loadu_ps(x + i))));
      }
      if (i < n) {
        const __mmask16 m = __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(
            o + i, m, _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_maskz_loadu_ps(m, x + i))));
      }
      return;
    }
  }
#endif
  const void* lower[] = {in[0], in[1]};
  kMaximumMath.for_dtype(kType)(lower, scalars & 3u, out, n);
  // The tile just written (L1-resident) is the minimum's first operand, read in place.
  const void* upper[] = {out, in[2]};
  kMinimumMath.for_dtype(kType)(upper, (scalars >> 1) & 2u, out, n);
}

ir::ElementwiseMath clip_math() {
  ir::ElementwiseMath math;
  math.by_dtype[static_cast<size_t>(DType::kFloat32)] = &clip_tile<DType::kFloat32>;
  math.by_dtype[static_cast<size_t>(DType::kFloat64)] = &clip_tile<DType::kFloat64>;
  math.by_dtype[static_cast<size_t>(DType::kInt32)] = &clip_tile<DType::kInt32>;
  math.by_dtype[static_cast<size_t>(DType::kInt64)] = &clip_tile<DType::kInt64>;
  return math;
}
const ir::ElementwiseMath kClipMath = clip_math();

const ir::OpRegistration kClip =
    ir::define_op("clip")
        .arity(3)
        .traits(kBinary)
        .infer(infer_elementwise("clip", kClipMath))
        .kernel(elementwise_kernel(kClipMath))
        .elementwise(kClipMath)
        .reference(ref_elementwise(
            [](std::span<const double> v) { return std::min(std::max(v[0], v[1]), v[2]); }))
        .samples({
            sample({f32({3, 5}), f32({}), f32({})}),
            sample({f32({3, 5}), f32({5}), f32({3, 1})}),
            sample({f32({4, 1, 3}), f32({2, 3}), f32({})}),
            sample({f32({}), f32({}), f32({})}),
            // Several parallel chunks and tiles, scalar bounds (ReLU6's form).
            sample({f32({3, 40000}), f32({}), f32({})}),
        })
        .doc(
            "clip(x, lo, hi): minimum(maximum(x, lo), hi), broadcasting all three (ONNX Clip, "
            "MindSpore's clamp); lo > hi gives hi, as the two ops do");

}  // namespace
}  // namespace mf::runtime::ops
