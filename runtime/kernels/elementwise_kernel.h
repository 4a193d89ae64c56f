#pragma once
// Builds an op's ElementwiseMath from one generic functor over Eigen arrays, and the inference and
// plain kernel that go with it. Included only by .cc files in runtime/ops (it pulls in Eigen).
//
// The functor receives Eigen::Map<const Array<T, Dynamic, 1>> operands (by const reference) and
// returns an Eigen expression; Eigen vectorises it. Write constants as T(...) with
// `using T = scalar_of<decltype(x)>;` so float math stays in float.

#include <Eigen/Core>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/strided.h"

namespace mf::runtime::ops {

template <typename E>
using scalar_of = typename std::decay_t<E>::Scalar;

template <typename T>
using ArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Elements per block of a TileFn: a multiple of every SIMD width (16 floats for AVX-512), so a
// block is whole packets. What is left after the last whole block goes in blocks of
// kTailBlock, itself a multiple of every SIMD width (the widest packet holds 16 floats), so short
// tensors and tile ends do not pay for a 64-element block.
inline constexpr int64_t kTileBlock = 64;
inline constexpr int64_t kTailBlock = 16;

// One operand of a block of Size elements: a fixed-size unaligned map at element i, or a broadcast
// of the one element of a scalar operand (kept in a register; the same value the map would load).
template <bool Scalar, int64_t Size, typename T>
auto operand_block(const T* p, int64_t i) {
  using Block = Eigen::Array<T, Size, 1>;
  if constexpr (Scalar) {
    return Block::Constant(p[0]);
  } else {
    return Eigen::Map<const Block>(p + i);
  }
}

// A padded copy of operand elements [i, n) for the last, partial block (padding repeats a real
// element, so the unused lanes compute nothing exceptional such as x / 0).
template <bool Scalar, typename T>
Eigen::Array<T, kTailBlock, 1> tail_block(const T* p, int64_t i, int64_t n) {
  using Block = Eigen::Array<T, kTailBlock, 1>;
  if constexpr (Scalar) {
    return Block::Constant(p[0]);
  } else {
    Block block = Block::Constant(p[i]);
    std::copy_n(p + i, n - i, block.data());
    return block;
  }
}

template <typename T, typename Out, typename Math, bool ScalarA, bool ScalarB>
void binary_blocks(const T* a, const T* b, Out* o, int64_t n) {
  const Math math{};
  int64_t i = 0;
  for (; i + kTileBlock <= n; i += kTileBlock) {
    Eigen::Map<Eigen::Array<Out, kTileBlock, 1>>(o + i) =
        math(operand_block<ScalarA, kTileBlock>(a, i), operand_block<ScalarB, kTileBlock>(b, i));
  }
  for (; i + kTailBlock <= n; i += kTailBlock) {
    Eigen::Map<Eigen::Array<Out, kTailBlock, 1>>(o + i) =
        math(operand_block<ScalarA, kTailBlock>(a, i), operand_block<ScalarB, kTailBlock>(b, i));
  }
  if (i == n) return;
  const Eigen::Array<Out, kTailBlock, 1> result =
      math(tail_block<ScalarA>(a, i, n), tail_block<ScalarB>(b, i, n));
  std::copy_n(result.data(), n - i, o + i);
}

template <typename T, typename Out, typename Math>
void unary_blocks(const T* a, Out* o, int64_t n) {
  const Math math{};
  int64_t i = 0;
  for (; i + kTileBlock <= n; i += kTileBlock) {
    Eigen::Map<Eigen::Array<Out, kTileBlock, 1>>(o + i) =
        math(operand_block<false, kTileBlock>(a, i));
  }
  for (; i + kTailBlock <= n; i += kTailBlock) {
    Eigen::Map<Eigen::Array<Out, kTailBlock, 1>>(o + i) =
        math(operand_block<false, kTailBlock>(a, i));
  }
  if (i == n) return;
  const Eigen::Array<Out, kTailBlock, 1> result = math(tail_block<false>(a, i, n));
  std::copy_n(result.data(), n - i, o + i);
}

// One TileFn: n elements of N same-typed inputs (T) to an output of Out.
//
// Every element goes through the same packet code whatever its address or its place in the
// tensor: whole blocks are fixed-size unaligned maps (Eigen evaluates those packet by packet from
// the first element, with no scalar head to reach an aligned address), and the partial last block
// is copied into a padded block and computed the same way. A dynamic-size map would peel a head up
// to the first aligned address and take it through the scalar functor, whose rounding (exp, tanh)
// is not the packet functor's: where a tile or a chunk began, or how a buffer was aligned, would
// change results. Here the plain kernel, the fused kernel and any thread count agree bit for bit.
template <typename T, typename Out, int N, typename Math>
void eigen_tile(const void* const* in, uint32_t scalars, void* out, int64_t n) {
  static_assert(N == 1 || N == 2, "ternary ops build their TileFn by hand (select)");
  const T* a = static_cast<const T*>(in[0]);
  Out* o = static_cast<Out*>(out);
  if constexpr (N == 1) {
    if (scalars & 1u) {
      // One value repeated: computed once, through the same packet code.
      const Eigen::Array<Out, kTailBlock, 1> result = Math{}(tail_block<true>(a, 0, 1));
      std::fill_n(o, n, result[0]);
      return;
    }
    unary_blocks<T, Out, Math>(a, o, n);
  } else {
    const T* b = static_cast<const T*>(in[1]);
    switch (scalars & 3u) {
      case 0:
        return binary_blocks<T, Out, Math, false, false>(a, b, o, n);
      case 1:
        return binary_blocks<T, Out, Math, true, false>(a, b, o, n);
      case 2:
        return binary_blocks<T, Out, Math, false, true>(a, b, o, n);
      default:
        return binary_blocks<T, Out, Math, true, true>(a, b, o, n);
    }
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
