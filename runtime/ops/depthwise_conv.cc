#include "runtime/ops/depthwise_conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

float activate(float v, const DepthwiseActivation& a) {
  switch (a.kind) {
    case DepthwiseActivation::Kind::kRelu:
      return std::max(v, 0.0f);
    case DepthwiseActivation::Kind::kClip:
      return std::min(std::max(v, a.lo), a.hi);
    case DepthwiseActivation::Kind::kNone:
      break;
  }
  return v;
}

// One output element, tap by tap, skipping taps in the padding.
float output_at(const float* x, const float* weight, float bias, const DepthwiseGeometry& g,
                int64_t oy, int64_t ox, const DepthwiseActivation& activation) {
  float acc = 0.0f;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = oy * g.sh - g.top + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = ox * g.sw - g.left + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      acc = std::fma(weight[ky * g.kw + kx], x[iy * g.w + ix], acc);
    }
  }
  return activate(acc + bias, activation);
}

#if defined(__AVX512F__)
// One tap (kx) of one block of up to 16 output columns starting at ox: where in the input row its
// lanes read, and which lanes read inside the row (the others skip the tap). The same for every
// row and plane, so computed once per call (the divisions in it cost more than the FMAs).
struct ColumnTap {
  int64_t start = 0;            // input column of lane 0: ox * sw + kx * dw - left
  __mmask16 lanes = 0;          // lanes whose input column is in [0, w)
  __mmask16 low = 0, high = 0;  // stride 2: which of the 32 inputs from `start` are read
};

__mmask16 bit_range(int64_t from, int64_t to) {  // bits [from, to) of 16, clamped
  from = std::clamp<int64_t>(from, 0, 16), to = std::clamp<int64_t>(to, from, 16);
  return __mmask16(((1u << to) - 1) & ~((1u << from) - 1));
}

std::vector<ColumnTap> column_taps(const DepthwiseGeometry& g) {
  const int64_t blocks = (g.ow + 15) / 16;
  std::vector<ColumnTap> taps(size_t(blocks * g.kw));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n = std::min<int64_t>(16, g.ow - 16 * b);
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      ColumnTap& t = taps[size_t(b * g.kw + kx)];
      t.start = 16 * b * g.sw + kx * g.dw - g.left;
      // Lane i reads column start + i * sw, which must lie in [0, w - 1].
      int64_t first = t.start >= 0 ? 0 : (-t.start + g.sw - 1) / g.sw;
      int64_t last = g.w - 1 - t.start < 0 ? 0 : (g.w - 1 - t.start) / g.sw + 1;
      first = std::min(first, n);
      last = std::clamp(last, first, n);
      t.lanes = bit_range(first, last);
      if (first < last) {  // inputs [first * sw, (last - 1) * sw] from start
        const int64_t r0 = first * g.sw, r1 = (last - 1) * g.sw + 1;
        t.low = bit_range(r0, r1);
        t.high = bit_range(r0 - 16, r1 - 16);
      }
    }
  }
  return taps;
}

// J blocks at once, each its own accumulator, so J FMA chains are in flight instead of one (a
// single chain of kh * kw dependent FMAs left the core waiting on their latency). Per lane, the
// same chain as output_at: taps in (ky, kx) order from 0, a tap outside the input skipped (a
// masked FMA keeps the lane; a masked-off input is not read, so nothing outside the row is), +
// bias, the activation.
template <int J, int kStride, int kKw>
void blocks(const float* x, const float* weight, float bias, const DepthwiseGeometry& g,
            const ColumnTap* taps, const int64_t* oy, const int64_t* block,
            const DepthwiseActivation& activation, float* y) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  // kKw: the window's width when known at compile time (3, mobilenet's; the loop over it unrolls),
  // else 0.
  const int64_t kh = g.kh, kw = kKw > 0 ? kKw : g.kw, w = g.w, h = g.h;
  const ColumnTap* block_taps[J];
  for (int j = 0; j < J; ++j) block_taps[j] = taps + block[j] * kw;
  __m512 acc[J];
  for (int j = 0; j < J; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* row[J];  // null where the tap row lies in the padding
    for (int j = 0; j < J; ++j) {
      const int64_t iy = oy[j] * g.sh - g.top + ky * g.dh;
      row[j] = iy >= 0 && iy < h ? x + iy * w : nullptr;
    }
    for (int64_t kx = 0; kx < kw; ++kx) {
      const __m512 wv = _mm512_set1_ps(weight[ky * kw + kx]);
      for (int j = 0; j < J; ++j) {
        const ColumnTap& t = block_taps[j][kx];
        if (row[j] == nullptr) continue;
        const float* p = row[j] + t.start;
        __m512 in;
        if constexpr (kStride == 1) {
          in = _mm512_maskz_loadu_ps(t.lanes, p);
        } else {
          in = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(t.low, p), even,
                                      _mm512_maskz_loadu_ps(t.high, p + 16));
        }
        acc[j] = _mm512_mask3_fmadd_ps(wv, in, acc[j], t.lanes);
      }
    }
  }
  for (int j = 0; j < J; ++j) {
    __m512 v = _mm512_add_ps(acc[j], _mm512_set1_ps(bias));
    if (activation.kind == DepthwiseActivation::Kind::kRelu) {
      v = _mm512_max_ps(v, _mm512_setzero_ps());
    } else if (activation.kind == DepthwiseActivation::Kind::kClip) {
      v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(activation.lo)),
                        _mm512_set1_ps(activation.hi));
    }
    const int64_t ox = 16 * block[j];
    _mm512_mask_storeu_ps(y + oy[j] * g.ow + ox, bit_range(0, g.ow - ox), v);
  }
}

template <int kStride, int kKw>
void plane_blocks(const float* x, const float* weight, float bias, const DepthwiseGeometry& g,
                  const ColumnTap* taps, const DepthwiseActivation& activation, float* y) {
  constexpr int kJ = 4;
  int64_t oy[kJ], block[kJ];
  int count = 0;
  const int64_t blocks_per_row = (g.ow + 15) / 16;
  for (int64_t r = 0; r < g.oh; ++r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      oy[count] = r, block[count] = b;
      if (++count == kJ) {
        blocks<kJ, kStride, kKw>(x, weight, bias, g, taps, oy, block, activation, y);
        count = 0;
      }
    }
  }
  for (int j = 0; j < count; ++j) {
    blocks<1, kStride, kKw>(x, weight, bias, g, taps, oy + j, block + j, activation, y);
  }
}
#endif

void convolve_plane(const float* x, const float* weight, float bias, float* y,
                    const DepthwiseGeometry& g, const DepthwiseActivation& activation,
                    const void* column_taps) {
#if defined(__AVX512F__)
  if (column_taps != nullptr) {
    const auto* taps = static_cast<const ColumnTap*>(column_taps);
    if (g.kw == 3) {
      return g.sw == 1 ? plane_blocks<1, 3>(x, weight, bias, g, taps, activation, y)
                       : plane_blocks<2, 3>(x, weight, bias, g, taps, activation, y);
    }
    return g.sw == 1 ? plane_blocks<1, 0>(x, weight, bias, g, taps, activation, y)
                     : plane_blocks<2, 0>(x, weight, bias, g, taps, activation, y);
  }
#endif
  (void)column_taps;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      y[oy * g.ow + ox] = output_at(x, weight, bias, g, oy, ox, activation);
    }
  }
}

}  // namespace

void depthwise_conv2d_nchw(const float* x, const float* weight, const float* bias, float* y,
                           const DepthwiseGeometry& g, const DepthwiseActivation& activation) {
  const int64_t planes = g.batch * g.channels;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // A few planes per chunk: a 7x7 plane is too little work to be a task of its own.
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1));
#if defined(__AVX512F__)
  // Strides 1 and 2 run sixteen outputs at a time; others (rare) one by one.
  std::vector<ColumnTap> taps;
  if (g.sw == 1 || g.sw == 2) taps = column_taps(g);
  const void* column_taps_or_null = taps.empty() ? nullptr : taps.data();
#else
  const void* column_taps_or_null = nullptr;
#endif
  parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t c = p % g.channels;
      convolve_plane(x + p * in_plane, weight + c * g.kh * g.kw, bias ? bias[c] : 0.0f,
                     y + p * out_plane, g, activation, column_taps_or_null);
    }
  });
}

}  // namespace mf::runtime::ops
