#pragma once
// Row math whose results depend only on the values, never on addresses: elementwise maps over a
// row, and sums, maxima and minima in an order fixed by the row's length. Included only by .cc
// files in runtime/ops (it pulls in Eigen).
//
// Eigen's own reductions of a dynamic-size map start their packets at the first aligned address:
// the same row at another address (a tile buffer of the fused kernel, a row at an odd offset, an
// AVX-512 build's 64-byte packets against a 16-byte-aligned buffer) would be summed in another
// order and round differently. Here lanes accumulate fixed blocks from the row's first element
// with unaligned loads, the lanes are combined in a fixed tree, and the tail is added in order.

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mf::runtime::ops {

enum class RowReduction { kSum, kMax, kMin };

// Elements accumulated side by side: a multiple of every SIMD width, several packets wide so
// additions overlap in the pipeline.
inline constexpr int64_t kReduceLanes = 64;

template <RowReduction R, typename T>
T reduce_lanes(T a, T b) {
  if constexpr (R == RowReduction::kSum) {
    return a + b;
  } else if constexpr (R == RowReduction::kMax) {
    return std::max(a, b);
  } else {
    return std::min(a, b);
  }
}

// Rows longer than this are reduced segment by segment, the segments' results combined left to
// right: the reduce kernel reduces one long row's segments in parallel in exactly this order.
inline constexpr int64_t kReduceSegment = int64_t{1} << 15;

// A segment of 1 <= n <= kReduceSegment elements reduced; see reduce_row_fixed.
template <RowReduction R, typename T, typename Term>
T reduce_segment_fixed(const T* x, int64_t n, Term term);

// A row of n elements reduced (a sum of none is 0); x need not be aligned. The per-element term is
// `term(x)` applied to each block (an Eigen expression of the block, e.g. the identity or a
// square), so sum((x - mean)^2) needs no temporary row.
template <RowReduction R, typename T, typename Term>
T reduce_row_fixed(const T* x, int64_t n, Term term) {
  if (n == 0) return T(0);  // only a sum may be empty; the ops reject an empty max or min
  T result = reduce_segment_fixed<R>(x, std::min(n, kReduceSegment), term);
  for (int64_t s = kReduceSegment; s < n; s += kReduceSegment) {
    result = reduce_lanes<R>(result,
                             reduce_segment_fixed<R>(x + s, std::min(kReduceSegment, n - s), term));
  }
  return result;
}

template <RowReduction R, typename T, typename Term>
T reduce_segment_fixed(const T* x, int64_t n, Term term) {
  using Lanes = Eigen::Array<T, kReduceLanes, 1>;
  int64_t i = 0;
  T result{};
  bool have = false;
  if (n >= kReduceLanes) {
    Lanes acc = term(Eigen::Map<const Lanes>(x));
    for (i = kReduceLanes; i + kReduceLanes <= n; i += kReduceLanes) {
      if constexpr (R == RowReduction::kSum) {
        acc += term(Eigen::Map<const Lanes>(x + i));
      } else if constexpr (R == RowReduction::kMax) {
        acc = acc.max(term(Eigen::Map<const Lanes>(x + i)));
      } else {
        acc = acc.min(term(Eigen::Map<const Lanes>(x + i)));
      }
    }
    // A fixed pairwise tree over the lanes.
    for (int64_t width = kReduceLanes / 2; width >= 1; width /= 2) {
      for (int64_t l = 0; l < width; ++l) acc[l] = reduce_lanes<R>(acc[l], acc[l + width]);
    }
    result = acc[0];
    have = true;
  }
  if (i < n) {
    // The tail through the same term code: a padded block, of which the first n - i count.
    Lanes tail = Lanes::Constant(x[i]);
    std::copy_n(x + i, n - i, tail.data());
    const Lanes terms = term(tail);
    for (int64_t l = 0; l < n - i; ++l) {
      result = have ? reduce_lanes<R>(result, terms[l]) : terms[l];
      have = true;
    }
  }
  return result;
}

template <RowReduction R, typename T>
T reduce_row_fixed(const T* x, int64_t n) {
  return reduce_row_fixed<R>(x, n, [](const auto& block) { return block; });
}

// f(v) for one value, through the packet code an elementwise op over a tensor takes: a row
// kernel's per-row sqrt or log then rounds as the expanded graph's sqrt or log op does.
template <typename T, typename F>
T packet_scalar(T v, F f) {
  using Lanes = Eigen::Array<T, kReduceLanes, 1>;
  const Lanes result = f(Lanes::Constant(v));
  return result[0];
}

// out[i] = f(blocks of ins...)[i] over rows of n elements; an input may alias out, none need be
// aligned. f maps fixed-size block expressions (one per input row) to an expression of the same
// size. Every element takes the packet path (the tail through padded blocks), as eigen_tile does.
template <typename Out, typename F, typename... T>
void map_row_fixed(Out* out, int64_t n, F f, const T*... ins) {
  using OutBlock = Eigen::Array<Out, kReduceLanes, 1>;
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    Eigen::Map<OutBlock>(out + i) =
        f(Eigen::Map<const Eigen::Array<T, kReduceLanes, 1>>(ins + i)...);
  }
  if (i == n) return;
  auto padded = [&](const auto* row) {
    using Block =
        Eigen::Array<std::remove_cv_t<std::remove_pointer_t<decltype(row)>>, kReduceLanes, 1>;
    Block block = Block::Constant(row[i]);
    std::copy_n(row + i, n - i, block.data());
    return block;
  };
  const OutBlock result = f(padded(ins)...);
  std::copy_n(result.data(), n - i, out + i);
}

}  // namespace mf::runtime::ops
