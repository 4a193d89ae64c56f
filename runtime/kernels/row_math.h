#pragma once
// Row math whose results depend only on the values, never on addresses: elementwise maps over a
// row, and sums, maxima and minima in an order fixed by the row's length. Included only by .cc
// files in runtime/ops (it pulls in Eigen).
//
// Eigen's own reductions of a dynamic-size map start their packets at the first aligned address:
// the same row at another address (a tile buffer of the fused kernel, a row at an odd offset, an
// AVX-512 build's 64-byte packets against a 16-byte-aligned buffer) would be summed in another
// order and round differently. Here lanes accumulate fixed blocks from the row's first element
// with unaligned loads and are combined in a fixed tree; a sum's tail goes into lanes of its own
// first, a maximum's or minimum's is taken in order. The order depends on the row's length alone.

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

// Elements per block after a row's last whole block of kReduceLanes: a multiple of every SIMD
// width, so short rows and tails take whole packets.
inline constexpr int64_t kTailLanes = 16;

template <typename T, int Half, int Width>
void sum_halves(Eigen::Array<T, Width, 1>& acc) {
  if constexpr (Half >= 1) {
    // Fixed sizes: Eigen emits the packets alone, with no alignment peeling.
    acc.template head<Half>() += acc.template segment<Half>(Half);
    sum_halves<T, Half / 2>(acc);
  }
}

// The lanes of `acc` combined pairwise in a fixed tree: lane l takes l + width / 2. A sum's tree
// runs on packets (each addition is the same IEEE operation lane by lane); max and min keep
// std::max / std::min, whose NaN rule packet instructions do not share.
template <RowReduction R, typename T, int Width>
T reduce_tree(Eigen::Array<T, Width, 1>& acc) {
  if constexpr (R == RowReduction::kSum) {
    sum_halves<T, Width / 2>(acc);
  } else {
    for (int64_t width = Width / 2; width >= 1; width /= 2) {
      for (int64_t l = 0; l < width; ++l) acc[l] = reduce_lanes<R>(acc[l], acc[l + width]);
    }
  }
  return acc[0];
}

// A sum's elements after the whole blocks of kReduceLanes: blocks of kTailLanes, the last one
// padded, its unused lanes set to -0.0 after the term (x + -0.0 is x for every x, -0.0 included),
// accumulated lane by lane.
template <typename T, typename Term>
Eigen::Array<T, kTailLanes, 1> sum_tail_lanes(const T* x, int64_t n, Term term) {
  using Tail = Eigen::Array<T, kTailLanes, 1>;
  Tail acc = Tail::Constant(T(-0.0));
  int64_t i = 0;
  for (; i + kTailLanes <= n; i += kTailLanes) acc += term(Eigen::Map<const Tail>(x + i));
  if (i < n) {
    Tail block = Tail::Constant(x[i]);
    std::copy_n(x + i, n - i, block.data());
    Tail terms = term(block);
    for (int64_t l = n - i; l < kTailLanes; ++l) terms[l] = T(-0.0);
    acc += terms;
  }
  return acc;
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
    if constexpr (R == RowReduction::kSum) {
      // The tail's lanes join the first lanes of the blocks' before the tree.
      if (i < n) acc.template head<kTailLanes>() += sum_tail_lanes(x + i, n - i, term);
      return reduce_tree<R>(acc);
    }
    result = reduce_tree<R>(acc);
    have = true;
  } else if constexpr (R == RowReduction::kSum) {
    auto acc = sum_tail_lanes(x, n, term);
    return reduce_tree<R>(acc);
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
// size. Every element takes the packet path (the tail through blocks of kTailLanes, the last one
// padded), as eigen_tile does.
template <typename Out, typename F, typename... T>
void map_row_fixed(Out* out, int64_t n, F f, const T*... ins) {
  using OutBlock = Eigen::Array<Out, kReduceLanes, 1>;
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    Eigen::Map<OutBlock>(out + i) =
        f(Eigen::Map<const Eigen::Array<T, kReduceLanes, 1>>(ins + i)...);
  }
  using OutTail = Eigen::Array<Out, kTailLanes, 1>;
  for (; i + kTailLanes <= n; i += kTailLanes) {
    Eigen::Map<OutTail>(out + i) = f(Eigen::Map<const Eigen::Array<T, kTailLanes, 1>>(ins + i)...);
  }
  if (i == n) return;
  auto padded = [&](const auto* row) {
    using Block =
        Eigen::Array<std::remove_cv_t<std::remove_pointer_t<decltype(row)>>, kTailLanes, 1>;
    Block block = Block::Constant(row[i]);
    std::copy_n(row + i, n - i, block.data());
    return block;
  };
  const OutTail result = f(padded(ins)...);
  std::copy_n(result.data(), n - i, out + i);
}

}  // namespace mf::runtime::ops
