// Predicates (equal, less, greater -> Bool; isnan, isinf), logic over Bool (logical_and, _or,
// _xor, _not) and select(cond, a, b), all with numpy broadcasting.

#include <cmath>

#include "runtime/kernels/elementwise_kernel.h"
#include "runtime/kernels/reference.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr Trait kPredicate = Trait::kElementwise | Trait::kBroadcast | Trait::kPure;
// Predicates and logic give Bool: no gradient flows through them.
constexpr Trait kFlat = Trait::kNoGradient;

std::vector<ir::OpSample> predicate_samples() {
  return {
      sample({f32({3, 5}), f32({3, 5})}),
      sample({f32({3, 5}), f32({5})}),
      sample({f32({4, 1, 3}), f32({2, 3})}),
      sample({f32({}), f32({3, 5})}),
      sample({f32({}), f32({})}),
  };
}

ir::OpBuilder declare(std::string name, const ir::ElementwiseMath& math,
                      double (*reference)(double, double), std::string doc, Trait extra) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(2)
      .traits(kPredicate | kFlat | extra)
      .infer(infer_elementwise(name, math, DType::kBool))
      .kernel(elementwise_kernel(math))
      .elementwise(math)
      .reference(ref_binary(reference))
      .samples(predicate_samples())
      .doc(std::move(doc));
  return b;
}

const ir::ElementwiseMath kEqualMath =
    make_predicate_math<2, float, double, int32_t, int64_t, bool>(
        [](const auto& a, const auto& b) { return a == b; });
const ir::ElementwiseMath kLessMath = make_predicate_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a < b; });
const ir::ElementwiseMath kGreaterMath = make_predicate_math<2, float, double, int32_t, int64_t>(
    [](const auto& a, const auto& b) { return a > b; });

const ir::OpRegistration kEqual = declare(
    "equal", kEqualMath, [](double a, double b) { return a == b ? 1.0 : 0.0; }, "a == b -> Bool",
    Trait::kCommutative);
const ir::OpRegistration kLess = declare(
    "less", kLessMath, [](double a, double b) { return a < b ? 1.0 : 0.0; }, "a < b -> Bool",
    Trait::kNone);
const ir::OpRegistration kGreater = declare(
    "greater", kGreaterMath, [](double a, double b) { return a > b ? 1.0 : 0.0; }, "a > b -> Bool",
    Trait::kNone);

// Classification of floats: x -> Bool.
ir::OpBuilder declare_classify(std::string name, const ir::ElementwiseMath& math,
                               double (*reference)(double), std::string doc) {
  ir::OpBuilder b = ir::define_op(name);
  b.arity(1)
      .traits(Trait::kElementwise | Trait::kPure | kFlat)
      .infer(infer_elementwise(name, math, DType::kBool))
      .kernel(elementwise_kernel(math))
      .elementwise(math)
      .reference(ref_unary(reference))
      .samples(
          {sample({f32({7})}), sample({f32({3, 5})}), sample({f32({})}), sample({f32({2, 3, 4})})})
      .doc(std::move(doc));
  return b;
}

const ir::ElementwiseMath kIsNanMath =
    make_predicate_math<1, float, double>([](const auto& x) { return x.isNaN(); });
const ir::ElementwiseMath kIsInfMath =
    make_predicate_math<1, float, double>([](const auto& x) { return x.isInf(); });

const ir::OpRegistration kIsNan = declare_classify(
    "isnan", kIsNanMath, [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, "x is NaN -> Bool");
const ir::OpRegistration kIsInf = declare_classify(
    "isinf", kIsInfMath, [](double x) { return std::isinf(x) ? 1.0 : 0.0; },
    "x is +inf or -inf -> Bool");

// Logic: Bool inputs (broadcast) to a Bool output, element by element.
ir::OpBuilder declare_logic(std::string name, int arity, const ir::ElementwiseMath& math,
                            ir::ReferenceFn reference, std::string doc, Trait extra) {
  std::vector<ir::OpSample> samples;
  if (arity == 1) {
    samples = {sample({boolean({7})}), sample({boolean({3, 5})}), sample({boolean({})}),
               sample({boolean({2, 3, 4})})};
  } else {
    samples = {
        sample({boolean({3, 5}), boolean({3, 5})}),
        sample({boolean({3, 5}), boolean({5})}),
        sample({boolean({4, 1, 3}), boolean({2, 3})}),
        sample({boolean({}), boolean({3, 5})}),
        sample({boolean({}), boolean({})}),
    };
  }
  ir::OpBuilder b = ir::define_op(name);
  b.arity(arity)
      .traits((arity == 1 ? Trait::kElementwise | Trait::kPure : kPredicate) | kFlat | extra)
      .infer(infer_elementwise(name, math))
      .kernel(elementwise_kernel(math))
      .elementwise(math)
      .reference(std::move(reference))
      .samples(std::move(samples))
      .doc(std::move(doc));
  return b;
}

const ir::ElementwiseMath kLogicalAndMath = make_math<2, bool>([](const auto& a, const auto& b) {
  return a.binaryExpr(b, [](bool x, bool y) { return x && y; });
});
const ir::ElementwiseMath kLogicalOrMath = make_math<2, bool>([](const auto& a, const auto& b) {
  return a.binaryExpr(b, [](bool x, bool y) { return x || y; });
});
const ir::ElementwiseMath kLogicalXorMath = make_math<2, bool>([](const auto& a, const auto& b) {
  return a.binaryExpr(b, [](bool x, bool y) { return x != y; });
});
const ir::ElementwiseMath kLogicalNotMath =
    make_math<1, bool>([](const auto& x) { return x.unaryExpr([](bool v) { return !v; }); });

const ir::OpRegistration kLogicalAnd =
    declare_logic("logical_and", 2, kLogicalAndMath,
                  ref_binary([](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; }),
                  "a and b, Bool -> Bool", Trait::kCommutative);
const ir::OpRegistration kLogicalOr =
    declare_logic("logical_or", 2, kLogicalOrMath,
                  ref_binary([](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; }),
                  "a or b, Bool -> Bool", Trait::kCommutative);
const ir::OpRegistration kLogicalXor =
    declare_logic("logical_xor", 2, kLogicalXorMath,
                  ref_binary([](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; }),
                  "a xor b, Bool -> Bool", Trait::kCommutative);
const ir::OpRegistration kLogicalNot = declare_logic(
    "logical_not", 1, kLogicalNotMath, ref_unary([](double x) { return x != 0 ? 0.0 : 1.0; }),
    "not x, Bool -> Bool", Trait::kNone);

// select(cond, a, b): the tile math is indexed by the value dtype (the last input's), as for every
// elementwise op.
template <typename T>
void select_tile(const void* const* in, uint32_t scalars, void* out, int64_t n) {
  // No rounding here, so a plain loop is as exact as any packet path; operands that stand for
  // one repeated value are read at index 0.
  const bool* cond = static_cast<const bool*>(in[0]);
  const T* a = static_cast<const T*>(in[1]);
  const T* b = static_cast<const T*>(in[2]);
  const int64_t sc = (scalars & 1u) ? 0 : 1, sa = (scalars & 2u) ? 0 : 1,
                sb = (scalars & 4u) ? 0 : 1;
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = cond[i * sc] ? a[i * sa] : b[i * sb];
}

ir::ElementwiseMath select_math() {
  ir::ElementwiseMath math;
  math.by_dtype[static_cast<size_t>(DType::kFloat32)] = &select_tile<float>;
  math.by_dtype[static_cast<size_t>(DType::kFloat64)] = &select_tile<double>;
  math.by_dtype[static_cast<size_t>(DType::kInt32)] = &select_tile<int32_t>;
  math.by_dtype[static_cast<size_t>(DType::kInt64)] = &select_tile<int64_t>;
  math.by_dtype[static_cast<size_t>(DType::kBool)] = &select_tile<bool>;
  return math;
}
const ir::ElementwiseMath kSelectMath = select_math();

const ir::OpRegistration kSelect =
    ir::define_op("select")
        .arity(3)
        .traits(kPredicate)
        .infer([](std::span<const TensorType> inputs, const Attrs&) {
          MF_CHECK(inputs[0].dtype == DType::kBool, InvalidArgument,
                   "select: the condition (input 0) must be Bool, got ",
                   ir::dtype_name(inputs[0].dtype));
          const DType dtype = common_dtype("select", inputs, 1);
          check_math_dtype("select", kSelectMath, dtype);
          return std::vector<TensorType>{{dtype, broadcast_all("select", inputs)}};
        })
        .kernel(elementwise_kernel(kSelectMath))
        .elementwise(kSelectMath)
        .reference(
            ref_elementwise([](std::span<const double> v) { return v[0] != 0.0 ? v[1] : v[2]; }))
        .samples({
            sample({boolean({3, 5}), f32({3, 5}), f32({3, 5})}),
            sample({boolean({5}), f32({3, 5}), f32({})}),
            sample({boolean({4, 1, 3}), f32({2, 3}), f32({4, 2, 1})}),
            sample({boolean({}), f32({}), f32({})}),
        })
        .doc("select(cond, a, b): a where cond else b (numpy's where), broadcasting all three")
        // dout goes to a where cond holds, to b elsewhere; cond (Bool) takes none.
        .backward({.inputs = 0b001}, [](ir::GradBuilder& b) {
          const ir::GradValue zero = b.scalar(0, b.output_type(0).dtype);
          for (size_t i = 1; i < 3; ++i) {
            if (!b.wants_grad(i)) continue;
            const ir::GradValue g =
                b.op("select", {b.input(0), i == 1 ? b.dout(0) : zero, i == 1 ? zero : b.dout(0)});
            b.set_grad(i, b.reduce_to(g, b.input_type(i).shape));
          }
        });

}  // namespace
}  // namespace mf::runtime::ops
