// Unary elementwise ops. Each op gives its math once (an Eigen functor shared by the plain kernel
// and the fused-kernel evaluator) and an independent scalar reference in double.
//
// GELU comes as two ops, gelu_tanh and gelu_erf, rather than one op with an `approximate`
// attribute: tile math takes no attributes, so the form has to be part of the op's identity for
// fusion to reuse it bit for bit.

#include <cmath>
#include <numbers>

#include <unsupported/Eigen/SpecialFunctions>  // erf

#include "runtime/kernels/elementwise_kernel.h"
#include "runtime/kernels/expand_util.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr Trait kUnary = Trait::kElementwise | Trait::kPure;

std::vector<ir::OpSample> unary_samples(double low = -2.0, double high = 2.0) {
  return {sample({f32({7})}, {}, low, high), sample({f32({3, 5})}, {}, low, high),
          sample({f32({})}, {}, low, high), sample({f32({2, 3, 4})}, {}, low, high)};
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;  // 1 / sqrt(2)

// Each op states its math once, in a named constant; the declaration wraps it.
// neg, abs, relu and square over float32 are also emitted as single AVX-512 instructions by
// runtime/fused_jit.cc (neg as 0 - x, as Eigen's pnegate); change a functor here and
// tests/runtime/fused_jit_test.cc shows where the two part.
const ir::ElementwiseMath kNegMath =
    make_math<1, float, double, int32_t, int64_t>([](const auto& x) { return -x; });
const ir::ElementwiseMath kAbsMath =
    make_math<1, float, double, int32_t, int64_t>([](const auto& x) { return x.abs(); });
const ir::ElementwiseMath kExpMath =
    make_math<1, float, double>([](const auto& x) { return x.exp(); });
const ir::ElementwiseMath kLogMath =
    make_math<1, float, double>([](const auto& x) { return x.log(); });
const ir::ElementwiseMath kSqrtMath =
    make_math<1, float, double>([](const auto& x) { return x.sqrt(); });
const ir::ElementwiseMath kRsqrtMath =
    make_math<1, float, double>([](const auto& x) { return x.rsqrt(); });
const ir::ElementwiseMath kSquareMath =
    make_math<1, float, double, int32_t, int64_t>([](const auto& x) { return x * x; });
const ir::ElementwiseMath kReluMath = make_math<1, float, double>([](const auto& x) {
  using T = scalar_of<decltype(x)>;
  return x.max(T(0));
});
const ir::ElementwiseMath kSigmoidMath = make_math<1, float, double>([](const auto& x) {
  using T = scalar_of<decltype(x)>;
  return T(1) / (T(1) + (-x).exp());
});
const ir::ElementwiseMath kTanhMath =
    make_math<1, float, double>([](const auto& x) { return x.tanh(); });
const ir::ElementwiseMath kErfMath =
    make_math<1, float, double>([](const auto& x) { return x.erf(); });
const ir::ElementwiseMath kGeluTanhMath = make_math<1, float, double>([](const auto& x) {
  using T = scalar_of<decltype(x)>;
  return T(0.5) * x * (T(1) + (T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)).tanh());
});
const ir::ElementwiseMath kGeluErfMath = make_math<1, float, double>([](const auto& x) {
  using T = scalar_of<decltype(x)>;
  return T(0.5) * x * (T(1) + (x * T(kInvSqrt2)).erf());
});
// sign: -1, 0 or 1 by comparisons (NaN compares false both ways and stays NaN), element by element.
const ir::ElementwiseMath kSignMath =
    make_math<1, float, double, int32_t, int64_t>([](const auto& x) {
      using T = scalar_of<decltype(x)>;
      return x.unaryExpr([](T v) {
        return v > T(0) ? T(1) : v < T(0) ? T(-1) : v == T(0) ? T(0) : v;
      });
    });
const ir::ElementwiseMath kFloorMath =
    make_math<1, float, double>([](const auto& x) { return x.floor(); });
const ir::ElementwiseMath kCeilMath =
    make_math<1, float, double>([](const auto& x) { return x.ceil(); });
// rint rounds in the current rounding mode: to nearest, halves to even (nothing here changes it).
const ir::ElementwiseMath kRoundMath =
    make_math<1, float, double>([](const auto& x) { return x.rint(); });

// Trigonometric and hyperbolic functions: Eigen's functors (packet code where Eigen has it, the
// same element by element elsewhere), one per op.
const ir::ElementwiseMath kSinMath =
    make_math<1, float, double>([](const auto& x) { return x.sin(); });
const ir::ElementwiseMath kCosMath =
    make_math<1, float, double>([](const auto& x) { return x.cos(); });
const ir::ElementwiseMath kTanMath =
    make_math<1, float, double>([](const auto& x) { return x.tan(); });
const ir::ElementwiseMath kAsinMath =
    make_math<1, float, double>([](const auto& x) { return x.asin(); });
const ir::ElementwiseMath kAcosMath =
    make_math<1, float, double>([](const auto& x) { return x.acos(); });
const ir::ElementwiseMath kAtanMath =
    make_math<1, float, double>([](const auto& x) { return x.atan(); });
const ir::ElementwiseMath kSinhMath =
    make_math<1, float, double>([](const auto& x) { return x.sinh(); });
const ir::ElementwiseMath kCoshMath =
    make_math<1, float, double>([](const auto& x) { return x.cosh(); });
const ir::ElementwiseMath kAsinhMath =
    make_math<1, float, double>([](const auto& x) { return x.asinh(); });
const ir::ElementwiseMath kAcoshMath =
    make_math<1, float, double>([](const auto& x) { return x.acosh(); });
const ir::ElementwiseMath kAtanhMath =
    make_math<1, float, double>([](const auto& x) { return x.atanh(); });

// Expanders: each mirrors its functor above operation by operation (same operands, same order), so
// the basic ops compute the same bits and are always exact.
std::vector<ir::Value> expand_square(ir::Graph& graph, ir::Node& node, bool) {
  Expansion e(graph, node);
  return {e.op("mul", {e.input(0), e.input(0)})};
}

std::vector<ir::Value> expand_sigmoid(ir::Graph& graph, ir::Node& node, bool) {
  Expansion e(graph, node);
  const DType t = e.input_type(0).dtype;
  const ir::Value exp = e.op("exp", {e.op("neg", {e.input(0)})});
  return {e.op("div", {e.scalar(1, t), e.op("add", {e.scalar(1, t), exp})})};
}

std::vector<ir::Value> expand_gelu_tanh(ir::Graph& graph, ir::Node& node, bool) {
  Expansion e(graph, node);
  const ir::Value x = e.input(0);
  const DType t = e.input_type(0).dtype;
  ir::Value cube = e.op("mul", {e.scalar(kGeluCubic, t), x});
  cube = e.op("mul", {e.op("mul", {cube, x}), x});
  const ir::Value inner = e.op("mul", {e.scalar(kSqrt2OverPi, t), e.op("add", {x, cube})});
  const ir::Value one_plus = e.op("add", {e.scalar(1, t), e.op("tanh", {inner})});
  return {e.op("mul", {e.op("mul", {e.scalar(0.5, t), x}), one_plus})};
}

std::vector<ir::Value> expand_gelu_erf(ir::Graph& graph, ir::Node& node, bool) {
  Expansion e(graph, node);
  const ir::Value x = e.input(0);
  const DType t = e.input_type(0).dtype;
  const ir::Value erf = e.op("erf", {e.op("mul", {x, e.scalar(kInvSqrt2, t)})});
  const ir::Value one_plus = e.op("add", {e.scalar(1, t), erf});
  return {e.op("mul", {e.op("mul", {e.scalar(0.5, t), x}), one_plus})};
}

// Backward rules: dout times the local derivative. A rule reads the output where the derivative is
// cheapest from it (exp, sqrt, sigmoid, tanh, relu), so the input can be freed after the forward.
constexpr ir::GradNeeds kNeedsInput{.inputs = 1};
constexpr ir::GradNeeds kNeedsOutput{.outputs = 1};

ir::GradValue x_of(ir::GradBuilder& b) {
  return b.input(0);
}
ir::GradValue y_of(ir::GradBuilder& b) {
  return b.output(0);
}

// 1 - v * v (tanh's derivative from its output).
ir::GradValue one_minus_square(ir::GradBuilder& b, ir::GradValue v) {
  return b.op("sub", {scalar_like(b, 1), b.op("mul", {v, v})});
}

// d/dx 0.5 x (1 + tanh(u)), u = c (x + k x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2).
ir::GradValue gelu_tanh_derivative(ir::GradBuilder& b) {
  const ir::GradValue x = x_of(b);
  const ir::GradValue x2 = b.op("mul", {x, x});
  const ir::GradValue cubic = b.op("mul", {scalar_like(b, kGeluCubic), b.op("mul", {x2, x})});
  const ir::GradValue t =
      b.op("tanh", {b.op("mul", {scalar_like(b, kSqrt2OverPi), b.op("add", {x, cubic})})});
  const ir::GradValue du = b.op(
      "mul", {scalar_like(b, kSqrt2OverPi),
              b.op("add", {scalar_like(b, 1), b.op("mul", {scalar_like(b, 3 * kGeluCubic), x2})})});
  const ir::GradValue left =
      b.op("mul", {scalar_like(b, 0.5), b.op("add", {scalar_like(b, 1), t})});
  const ir::GradValue right = b.op(
      "mul", {b.op("mul", {scalar_like(b, 0.5), x}), b.op("mul", {one_minus_square(b, t), du})});
  return b.op("add", {left, right});
}

// d/dx 0.5 x (1 + erf(x / sqrt 2)): 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
ir::GradValue gelu_erf_derivative(ir::GradBuilder& b) {
  const ir::GradValue x = x_of(b);
  const ir::GradValue cdf =
      b.op("mul", {scalar_like(b, 0.5),
                   b.op("add", {scalar_like(b, 1),
                                b.op("erf", {b.op("mul", {x, scalar_like(b, kInvSqrt2)})})})});
  const ir::GradValue density =
      b.op("mul", {scalar_like(b, 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2),
                   b.op("exp", {b.op("mul", {scalar_like(b, -0.5), b.op("mul", {x, x})})})});
  return b.op("add", {cdf, b.op("mul", {x, density})});
}

// sign, floor, ceil and round are flat wherever they are differentiable: their rule gives no
// gradient, which the builder makes zeros.
void zero_gradient(ir::GradBuilder&) {}

// 1 / sqrt(c + s x^2), the derivative of asin (c 1, s -1), asinh (1, 1) and acosh (-1, 1).
ir::GradValue inverse_sqrt_of(ir::GradBuilder& b, double c, double s) {
  const ir::GradValue x = b.input(0);
  const ir::GradValue sq = b.op("mul", {scalar_like(b, s), b.op("mul", {x, x})});
  return b.op("rsqrt", {b.op("add", {scalar_like(b, c), sq})});
}

// 1 / (1 + s x^2): atan (s 1) and atanh (s -1).
ir::GradValue reciprocal_of(ir::GradBuilder& b, double s) {
  const ir::GradValue x = b.input(0);
  const ir::GradValue sq = b.op("mul", {scalar_like(b, s), b.op("mul", {x, x})});
  return b.op("div", {scalar_like(b, 1), b.op("add", {scalar_like(b, 1), sq})});
}

ir::OpBuilder declare(std::string name, const ir::ElementwiseMath& math,
                      double (*reference)(double), std::string doc, Trait extra = Trait::kNone,
                      double low = -2.0, double high = 2.0) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(1)
      .traits(kUnary | extra)
      .infer(infer_elementwise(name, math))
      .kernel(elementwise_kernel(math))
      .elementwise(math)
      .reference(ref_unary(reference))
      .samples(unary_samples(low, high))
      .doc(std::move(doc));
  return b;
}

const ir::OpRegistration kNeg = declare(
                                    "neg", kNegMath, [](double x) { return -x; }, "-x")
                                    .backward({}, [](ir::GradBuilder& b) {
                                      if (b.wants_grad(0)) b.set_grad(0, b.op("neg", {b.dout(0)}));
                                    });
const ir::OpRegistration kAbs =
    declare(
        "abs", kAbsMath, [](double x) { return std::abs(x); }, "|x|")
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return b.op("sign", {b.input(0)}); }));
const ir::OpRegistration kExp = declare(
                                    "exp", kExpMath, [](double x) { return std::exp(x); }, "e^x")
                                    .backward(kNeedsOutput, chain_rule(y_of));
const ir::OpRegistration kLog = declare(
                                    "log", kLogMath, [](double x) { return std::log(x); },
                                    "natural logarithm", Trait::kNone, 0.1, 4.0)
                                    .backward(kNeedsInput, [](ir::GradBuilder& b) {
                                      if (!b.wants_grad(0)) return;
                                      b.set_grad(0, b.op("div", {b.dout(0), b.input(0)}));
                                    });
const ir::OpRegistration kSqrt =
    declare(
        "sqrt", kSqrtMath, [](double x) { return std::sqrt(x); }, "square root", Trait::kNone, 0.0,
        4.0)
        .backward(kNeedsOutput, [](ir::GradBuilder& b) {
          // 1 / (2 sqrt x) = 0.5 / y
          if (!b.wants_grad(0)) return;
          b.set_grad(0, b.op("div", {b.op("mul", {b.dout(0), scalar_like(b, 0.5)}), b.output(0)}));
        });
const ir::OpRegistration kRsqrt =
    declare(
        "rsqrt", kRsqrtMath, [](double x) { return 1.0 / std::sqrt(x); }, "1 / sqrt(x)",
        Trait::kNone, 0.1, 4.0)
        .backward(
            kNeedsOutput, chain_rule([](ir::GradBuilder& b) {
              // -x^(-3/2) / 2 = -y^3 / 2
              const ir::GradValue y = b.output(0);
              return b.op("mul", {scalar_like(b, -0.5), b.op("mul", {b.op("mul", {y, y}), y})});
            }));
const ir::OpRegistration kSquare =
    declare(
        "square", kSquareMath, [](double x) { return x * x; }, "x * x (expands to mul)",
        Trait::kComposite)
        .expander(expand_square)
        .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) {
                    return b.op("mul", {scalar_like(b, 2), b.input(0)});
                  }));
const ir::OpRegistration kRelu =
    declare(
        "relu", kReluMath, [](double x) { return x > 0 ? x : 0.0; }, "max(x, 0)")
        .backward(kNeedsOutput, chain_rule([](ir::GradBuilder& b) {
                    // sign(y) is 1 where x > 0 and 0 elsewhere (y >= 0): the step, as one
                    // elementwise op.
                    return b.op("sign", {b.output(0)});
                  }));
const ir::OpRegistration kSigmoid =
    declare(
        "sigmoid", kSigmoidMath, [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
        "1 / (1 + exp(-x)) (expands to neg, exp, add, div)", Trait::kComposite)
        .expander(expand_sigmoid)
        .backward(kNeedsOutput, chain_rule([](ir::GradBuilder& b) {
                    const ir::GradValue y = b.output(0);
                    return b.op("mul", {y, b.op("sub", {scalar_like(b, 1), y})});
                  }));
const ir::OpRegistration kTanh =
    declare(
        "tanh", kTanhMath, [](double x) { return std::tanh(x); }, "hyperbolic tangent")
        .backward(kNeedsOutput,
                  chain_rule([](ir::GradBuilder& b) { return one_minus_square(b, b.output(0)); }));
const ir::OpRegistration kErf =
    declare(
        "erf", kErfMath, [](double x) { return std::erf(x); }, "Gauss error function")
        .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) {
                    // 2 / sqrt(pi) exp(-x^2)
                    const ir::GradValue x = b.input(0);
                    return b.op("mul", {scalar_like(b, std::numbers::inv_sqrtpi * 2),
                                        b.op("exp", {b.op("neg", {b.op("mul", {x, x})})})});
                  }));
const ir::OpRegistration kGeluTanh =
    declare(
        "gelu_tanh", kGeluTanhMath,
        [](double x) {
          return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
        },
        "GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
        Trait::kComposite)
        .expander(expand_gelu_tanh)
        .backward(kNeedsInput, chain_rule(gelu_tanh_derivative));
const ir::OpRegistration kGeluErf =
    declare(
        "gelu_erf", kGeluErfMath,
        [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); },
        "GELU, exact form: 0.5 x (1 + erf(x / sqrt 2))", Trait::kComposite)
        .expander(expand_gelu_erf)
        .backward(kNeedsInput, chain_rule(gelu_erf_derivative));
const ir::OpRegistration kSign = declare(
                                     "sign", kSignMath,
                                     [](double x) {
                                       if (x > 0) return 1.0;
                                       if (x < 0) return -1.0;
                                       return x == 0 ? 0.0 : x;  // NaN stays NaN
                                     },
                                     "sign of x: -1, 0 or 1 (NaN stays NaN)")
                                     .backward({}, zero_gradient);
// Wider samples than [-2, 2], so floor, ceil and round cross several integers.
const ir::OpRegistration kFloor = declare(
                                      "floor", kFloorMath, [](double x) { return std::floor(x); },
                                      "largest integer <= x", Trait::kNone, -4.0, 4.0)
                                      .backward({}, zero_gradient);
const ir::OpRegistration kCeil = declare(
                                     "ceil", kCeilMath, [](double x) { return std::ceil(x); },
                                     "smallest integer >= x", Trait::kNone, -4.0, 4.0)
                                     .backward({}, zero_gradient);
const ir::OpRegistration kRound =
    declare(
        "round", kRoundMath,
        [](double x) {
          // Halves go to the even neighbour; x - floor(x) is exact for every float.
          const double below = std::floor(x), fraction = x - below;
          if (fraction != 0.5) return fraction < 0.5 ? below : below + 1;
          return std::fmod(below, 2.0) == 0 ? below : below + 1;
        },
        "x rounded to the nearest integer, halves to the even one (numpy's round, ONNX Round)",
        Trait::kNone, -4.0, 4.0)
        .backward({}, zero_gradient);

// Samples stay inside each function's domain: [-0.9, 0.9] for asin, acos and atanh, [1.1, 4] for
// acosh, [-1.2, 1.2] for tan (away from its poles).
const ir::OpRegistration kSin =
    declare(
        "sin", kSinMath, [](double x) { return std::sin(x); }, "sine")
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return b.op("cos", {b.input(0)}); }));
const ir::OpRegistration kCos = declare(
                                    "cos", kCosMath, [](double x) { return std::cos(x); }, "cosine")
                                    .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) {
                                                return b.op("neg", {b.op("sin", {b.input(0)})});
                                              }));
const ir::OpRegistration kTan =
    declare(
        "tan", kTanMath, [](double x) { return std::tan(x); }, "tangent", Trait::kNone, -1.2, 1.2)
        .backward(kNeedsOutput, chain_rule([](ir::GradBuilder& b) {
                    // 1 + tan^2
                    const ir::GradValue y = b.output(0);
                    return b.op("add", {scalar_like(b, 1), b.op("mul", {y, y})});
                  }));
const ir::OpRegistration kAsin =
    declare(
        "asin", kAsinMath, [](double x) { return std::asin(x); }, "arcsine", Trait::kNone, -0.9,
        0.9)
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return inverse_sqrt_of(b, 1, -1); }));
const ir::OpRegistration kAcos = declare(
                                     "acos", kAcosMath, [](double x) { return std::acos(x); },
                                     "arccosine", Trait::kNone, -0.9, 0.9)
                                     .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) {
                                                 return b.op("neg", {inverse_sqrt_of(b, 1, -1)});
                                               }));
const ir::OpRegistration kAtan =
    declare(
        "atan", kAtanMath, [](double x) { return std::atan(x); }, "arctangent")
        .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) { return reciprocal_of(b, 1); }));
const ir::OpRegistration kSinh =
    declare(
        "sinh", kSinhMath, [](double x) { return std::sinh(x); }, "hyperbolic sine")
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return b.op("cosh", {b.input(0)}); }));
const ir::OpRegistration kCosh =
    declare(
        "cosh", kCoshMath, [](double x) { return std::cosh(x); }, "hyperbolic cosine")
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return b.op("sinh", {b.input(0)}); }));
const ir::OpRegistration kAsinh =
    declare(
        "asinh", kAsinhMath, [](double x) { return std::asinh(x); }, "inverse hyperbolic sine")
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return inverse_sqrt_of(b, 1, 1); }));
const ir::OpRegistration kAcosh =
    declare(
        "acosh", kAcoshMath, [](double x) { return std::acosh(x); }, "inverse hyperbolic cosine",
        Trait::kNone, 1.1, 4.0)
        .backward(kNeedsInput,
                  chain_rule([](ir::GradBuilder& b) { return inverse_sqrt_of(b, -1, 1); }));
const ir::OpRegistration kAtanh =
    declare(
        "atanh", kAtanhMath, [](double x) { return std::atanh(x); }, "inverse hyperbolic tangent",
        Trait::kNone, -0.9, 0.9)
        .backward(kNeedsInput, chain_rule([](ir::GradBuilder& b) { return reciprocal_of(b, -1); }));

}  // namespace
}  // namespace mf::runtime::ops
