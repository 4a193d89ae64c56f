// Binary elementwise ops with numpy broadcasting. Inputs share one dtype (a cast is explicit in the
// graph); the output has the broadcast shape.

#include <algorithm>
#include <cmath>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "runtime/kernels/elementwise_kernel.h"
#include "runtime/kernels/grad_util.h"
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

// The shapes of binary_samples over Int32 and Int64, for ops defined on integers only (a sample
// with no floating input runs in its own dtype). [-2, 2] draws integers in [-10, 10]: zero and -1
// divisors included.
std::vector<ir::OpSample> integer_samples() {
  std::vector<ir::OpSample> out;
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    for (ir::OpSample s : binary_samples()) {
      for (TensorType& t : s.inputs) t.dtype = dtype;
      out.push_back(std::move(s));
    }
  }
  return out;
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

// Backward rules. Each operand's gradient is summed back to its own shape over the axes it was
// broadcast along (GradBuilder::reduce_to).
void set_reduced(ir::GradBuilder& b, size_t i, ir::GradValue g) {
  b.set_grad(i, b.reduce_to(g, b.input_type(i).shape));
}

void add_backward(ir::GradBuilder& b) {
  for (size_t i = 0; i < 2; ++i) {
    if (b.wants_grad(i)) set_reduced(b, i, b.dout(0));
  }
}

void sub_backward(ir::GradBuilder& b) {
  if (b.wants_grad(0)) set_reduced(b, 0, b.dout(0));
  // Negated after the sum: the smaller tensor.
  if (b.wants_grad(1)) b.set_grad(1, b.op("neg", {b.reduce_to(b.dout(0), b.input_type(1).shape)}));
}

void mul_backward(ir::GradBuilder& b) {
  for (size_t i = 0; i < 2; ++i) {
    if (b.wants_grad(i)) set_reduced(b, i, b.op("mul", {b.dout(0), b.input(1 - i)}));
  }
}

// y = a / b: da = dout / b, db = -dout a / b^2 = -(dout / b) y.
void div_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  const ir::GradValue over_b = b.op("div", {b.dout(0), b.input(1)});
  if (b.wants_grad(0)) set_reduced(b, 0, over_b);
  if (b.wants_grad(1)) {
    set_reduced(b, 1, b.op("neg", {b.op("mul", {over_b, b.output(0)})}));
  }
}

// y = a^b: da = b a^(b - 1), db = y log(a) (defined for a > 0, pow's domain for a real b).
void pow_backward(ir::GradBuilder& b) {
  const ir::GradValue a = b.input(0), e = b.input(1);
  if (b.wants_grad(0)) {
    const ir::GradValue power = b.op("pow", {a, b.op("sub", {e, scalar_like(b, 1)})});
    set_reduced(b, 0, b.op("mul", {b.dout(0), b.op("mul", {e, power})}));
  }
  if (b.wants_grad(1)) {
    set_reduced(b, 1, b.op("mul", {b.dout(0), b.op("mul", {b.output(0), b.op("log", {a})})}));
  }
}

// dout where `taken` is false goes to input `first`, where it is true to input 1 - first.
void route(ir::GradBuilder& b, ir::GradValue taken, ir::GradValue g, size_t first) {
  const ir::GradValue zero = scalar_like(b, 0);
  if (b.wants_grad(first)) set_reduced(b, first, b.op("select", {taken, zero, g}));
  if (b.wants_grad(1 - first)) set_reduced(b, 1 - first, b.op("select", {taken, g, zero}));
}

// maximum and minimum give dout to the operand that won; a tie goes to a (TensorFlow's rule), so
// that exactly one operand takes each element's gradient.
void maximum_backward(ir::GradBuilder& b) {
  route(b, b.op("less", {b.input(0), b.input(1)}), b.dout(0), 0);
}
void minimum_backward(ir::GradBuilder& b) {
  route(b, b.op("less", {b.input(1), b.input(0)}), b.dout(0), 0);
}

// clip(x, lo, hi) = minimum(maximum(x, lo), hi), differentiated as those two ops (ties to the
// first operand): hi takes dout where hi < maximum(x, lo), and the rest goes to x, or to lo where
// x < lo.
void clip_backward(ir::GradBuilder& b) {
  const ir::GradValue x = b.input(0), lo = b.input(1), hi = b.input(2), dy = b.dout(0);
  const ir::GradValue zero = scalar_like(b, 0);
  const ir::GradValue over = b.op("less", {hi, b.op("maximum", {x, lo})});
  if (b.wants_grad(2)) set_reduced(b, 2, b.op("select", {over, dy, zero}));
  if (!b.wants_grad(0) && !b.wants_grad(1)) return;
  const ir::GradValue inside = b.op("select", {over, zero, dy});
  const ir::GradValue under = b.op("less", {x, lo});
  if (b.wants_grad(0)) set_reduced(b, 0, b.op("select", {under, zero, inside}));
  if (b.wants_grad(1)) set_reduced(b, 1, b.op("select", {under, inside, zero}));
}

// truncate_mod over floats: y = a - b trunc(a / b), so da = dout and db = -dout trunc(a / b)
// = -dout (a - y) / b.
void truncate_mod_backward(ir::GradBuilder& b) {
  if (b.wants_grad(0)) set_reduced(b, 0, b.dout(0));
  if (!b.wants_grad(1)) return;
  const ir::GradValue quotient = b.op("div", {b.op("sub", {b.input(0), b.output(0)}), b.input(1)});
  set_reduced(b, 1, b.op("neg", {b.op("mul", {b.dout(0), quotient})}));
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

// Integer division and remainder never trap. C++'s / and % fault (SIGFPE on x86) on a zero divisor
// and on the one quotient that overflows, INT_MIN / -1; here a zero divisor gives 0 and a divisor
// of -1 negates with two's-complement wrap-around (INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0).
// Element by element (x86 has no vector integer division), so no lane ever divides by zero.
template <typename T>
T wrapping_neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

template <typename T>
T truncate_div_value(T a, T b) {
  if (b == 0) return T(0);
  if (b == -1) return wrapping_neg(a);
  return a / b;
}

// The remainder of truncate_div: the sign of the dividend (C's % and fmod). Floats: IEEE fmod, so
// a zero divisor gives NaN.
template <typename T>
T truncate_mod_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == 0 || b == -1) return T(0);
    return a % b;
  }
}

// The remainder of floor division: the sign of the divisor (Python's %).
template <typename T>
T floor_mod_value(T a, T b) {
  if (b == 0 || b == -1) return T(0);
  const T r = a % b;
  // r and b have opposite signs here, so r + b cannot overflow.
  return (r != 0 && (r < 0) != (b < 0)) ? T(r + b) : r;
}

const ir::ElementwiseMath kTruncateDivMath =
    make_math<2, int32_t, int64_t>([](const auto& a, const auto& b) {
      using T = scalar_of<decltype(a)>;
      return a.binaryExpr(b, [](T x, T y) { return truncate_div_value(x, y); });
    });
const ir::ElementwiseMath kTruncateModMath =
    make_math<2, float, double, int32_t, int64_t>([](const auto& a, const auto& b) {
      using T = scalar_of<decltype(a)>;
      return a.binaryExpr(b, [](T x, T y) { return truncate_mod_value(x, y); });
    });
const ir::ElementwiseMath kFloorModMath =
    make_math<2, int32_t, int64_t>([](const auto& a, const auto& b) {
      using T = scalar_of<decltype(a)>;
      return a.binaryExpr(b, [](T x, T y) { return floor_mod_value(x, y); });
    });

const ir::OpRegistration kAdd =
    declare(
        "add", kAddMath, [](double a, double b) { return a + b; }, "a + b", Trait::kCommutative)
        .backward({}, add_backward);
const ir::OpRegistration kSub =
    declare(
        "sub", kSubMath, [](double a, double b) { return a - b; }, "a - b")
        .backward({}, sub_backward);
const ir::OpRegistration kMul =
    declare(
        "mul", kMulMath, [](double a, double b) { return a * b; }, "a * b", Trait::kCommutative)
        .backward({.inputs = 0b11}, mul_backward);
// Divisors are kept away from zero in the samples: near a pole float32 and double differ by more
// than any tolerance says anything about.
const ir::OpRegistration kDiv =
    declare(
        "div", kDivMath, [](double a, double b) { return a / b; },
        "a / b (true division, floats only; truncate_div divides integers)", Trait::kNone, 0.5, 2.0)
        .backward({.inputs = 0b10, .outputs = 1}, div_backward);
// Integer division is its own op rather than div over integers: an op's reference sees values, not
// dtypes, and 7 / 2 is 3.5 in div's math. The references model the zero-divisor rule; the
// samples' integers include 0 and -1 divisors. (The wrap of INT_MIN / -1 is beyond the samples.)
const ir::OpRegistration kTruncateDiv =
    declare(
        "truncate_div", kTruncateDivMath,
        [](double a, double b) { return b == 0 ? 0.0 : std::trunc(a / b); },
        "a / b rounded toward zero, integers only (C's /, ONNX Div on integers); a zero divisor "
        "gives 0 rather than a fault, and INT_MIN / -1 wraps to INT_MIN")
        .samples(integer_samples());
// Float samples of truncate_mod never draw an exact zero divisor (floats give NaN there); their
// integer variants do, and give 0 as the reference says.
const ir::OpRegistration kTruncateMod =
    declare(
        "truncate_mod", kTruncateModMath,
        [](double a, double b) { return b == 0 ? 0.0 : std::fmod(a, b); },
        "remainder of truncate_div, with the sign of a (C's % and fmod, ONNX Mod with fmod=1); a "
        "zero "
        "divisor gives 0 for integers (no fault) and NaN for floats")
        .backward({.inputs = 0b11, .outputs = 1}, truncate_mod_backward);
const ir::OpRegistration kFloorMod =
    declare(
        "floor_mod", kFloorModMath,
        [](double a, double b) { return b == 0 ? 0.0 : a - b * std::floor(a / b); },
        "remainder of floor division, with the sign of b, integers only (Python's %, ONNX Mod "
        "with fmod=0); a zero divisor gives 0 rather than a fault")
        .samples(integer_samples());
const ir::OpRegistration kPow =
    declare(
        "pow", kPowMath, [](double a, double b) { return std::pow(a, b); },
        "a ^ b; a must be positive unless b is integral", Trait::kNone, 0.25, 2.0)
        .backward({.inputs = 0b11, .outputs = 1}, pow_backward);
const ir::OpRegistration kMaximum =
    declare(
        "maximum", kMaximumMath, [](double a, double b) { return std::max(a, b); },
        "elementwise max(a, b)", Trait::kCommutative)
        .backward({.inputs = 0b11}, maximum_backward);
const ir::OpRegistration kMinimum =
    declare(
        "minimum", kMinimumMath, [](double a, double b) { return std::min(a, b); },
        "elementwise min(a, b)", Trait::kCommutative)
        .backward({.inputs = 0b11}, minimum_backward);

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
            "MindSpore's clamp); lo > hi gives hi, as the two ops do")
        .backward({.inputs = 0b111}, clip_backward);

}  // namespace
}  // namespace mf::runtime::ops
