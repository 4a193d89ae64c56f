#pragma once
// Builds an op's ElementwiseMath from one generic functor over Eigen arrays, and the inference and
// plain kernel that go with it. Included only by .cc files in runtime/ops (it pulls in Eigen).
//
// The functor receives Eigen::Map<const Array<T, Dynamic, 1>> operands (by const reference) and
// returns an Eigen expression; Eigen vectorises it. Write constants as T(...) with
// `using T = scalar_of<decltype(x)>;` so float math stays in float.

#include <Eigen/Core>

#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

#include "runtime/ops/op_util.h"
#include "runtime/ops/strided.h"

namespace mf::runtime::ops {

template <typename E>
using scalar_of = typename std::decay_t<E>::Scalar;

template <typename T>
using ArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// One TileFn: n elements of N same-typed inputs (T) to an output of Out.
template <typename T, typename Out, int N, typename Math>
void eigen_tile(const void* const* in, void* out, int64_t n) {
  Eigen::Map<Eigen::Array<Out, Eigen::Dynamic, 1>> o(static_cast<Out*>(out), n);
  const Math math{};
  if constexpr (N == 1) {
    const ArrayMap<T> a(static_cast<const T*>(in[0]), n);
    o = math(a);
  } else if constexpr (N == 2) {
    const ArrayMap<T> a(static_cast<const T*>(in[0]), n);
    const ArrayMap<T> b(static_cast<const T*>(in[1]), n);
    o = math(a, b);
  } else {
    static_assert(N == 1 || N == 2, "ternary ops build their TileFn by hand (select)");
  }
}

// make_math<N, float, double>(functor): the functor's math for each listed dtype; output dtype =
// input dtype. The functor must be stateless (a captureless lambda).
template <int N, typename... Ts, typename Math>
ir::ElementwiseMath make_math(Math) {
  ir::ElementwiseMath math;
  ((math.by_dtype[static_cast<size_t>(ir::dtype_of<Ts>())] = &eigen_tile<Ts, Ts, N, Math>), ...);
  return math;
}

// The same for predicates: output Bool, table indexed by the input dtype.
template <int N, typename... Ts, typename Math>
ir::ElementwiseMath make_predicate_math(Math) {
  ir::ElementwiseMath math;
  ((math.by_dtype[static_cast<size_t>(ir::dtype_of<Ts>())] = &eigen_tile<Ts, bool, N, Math>), ...);
  return math;
}

// The dtypes an ElementwiseMath implements, in kAllDTypes order.
inline std::vector<DType> math_dtypes(const ir::ElementwiseMath& math) {
  std::vector<DType> out;
  for (DType d : ir::kAllDTypes) {
    if (math.for_dtype(d) != nullptr) out.push_back(d);
  }
  return out;
}

inline void check_math_dtype(std::string_view op, const ir::ElementwiseMath& math, DType dtype) {
  if (math.for_dtype(dtype) != nullptr) return;
  std::string names;
  for (DType d : math_dtypes(math))
    names += (names.empty() ? "" : ", ") + std::string(ir::dtype_name(d));
  MF_FAIL(InvalidArgument, op, " does not support ", ir::dtype_name(dtype), "; supported: ", names);
}

// Inference of an elementwise op: inputs share a dtype the math implements, shapes broadcast;
// the output has the broadcast shape and `out_dtype` (default: the input dtype).
inline ir::InferFn infer_elementwise(std::string op, ir::ElementwiseMath math,
                                     std::optional<DType> out_dtype = std::nullopt) {
  return [op = std::move(op), math, out_dtype](std::span<const TensorType> inputs, const Attrs&) {
    const DType dtype = common_dtype(op, inputs);
    check_math_dtype(op, math, dtype);
    return std::vector<TensorType>{{out_dtype.value_or(dtype), broadcast_all(op, inputs)}};
  };
}

// The plain kernel: the tile math over broadcast operands. The math table is indexed by the dtype
// of the LAST input (the operand dtype for arithmetic and predicates, the value dtype for select,
// whose first input is the Bool condition); the fused-kernel evaluator follows the same rule.
inline ir::KernelFn elementwise_kernel(ir::ElementwiseMath math) {
  return [math](const ir::KernelContext& ctx) {
    run_elementwise(ctx, math.for_dtype(ctx.inputs.back().type.dtype));
  };
}

}  // namespace mf::runtime::ops
