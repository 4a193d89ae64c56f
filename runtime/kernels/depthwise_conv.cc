#include "runtime/kernels/depthwise_conv.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "ir/shape.h"
#include "runtime/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

float activate(float v, const DirectActivation& a) {
  switch (a.kind) {
    case DirectActivation::Kind::kRelu:
      return std::max(v, 0.0f);
    case DirectActivation::Kind::kClip:
      return std::min(std::max(v, a.lo), a.hi);
    case DirectActivation::Kind::kNone:
      break;
  }
  return v;
}

// One output element: an FMA per tap, a tap in the padding reading 0 (as the vector path's padded
// copy does; with finite weights the same bits as skipping it, since the sum never is -0).
float output_at(const float* x, const float* weight, float bias, const WindowGeometry& g,
                int64_t oy, int64_t ox, const DirectActivation& activation) {
  float acc = 0.0f;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = oy * g.sh - g.top + ky * g.dh;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = ox * g.sw - g.left + kx * g.dw;
      const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
      acc = std::fma(weight[ky * g.kw + kx], inside ? x[iy * g.w + ix] : 0.0f, acc);
    }
  }
  return activate(acc + bias, activation);
}

#if defined(__AVX512F__)
// The plane copied with its padding as zeros, wide enough that every 16-lane load of every block
// (the last one's unused lanes included) reads inside it: the loop then has no masks, no bounds
// and no table (with them it ran at 320 us where this runs at 281 on 144 planes of 56x56). The copy
// is one pass over a plane that sits in L1 (a 56x56 plane: 12 KiB).
struct PaddedPlane {
  int64_t rows = 0, stride = 0;                 // floats per padded row
  int64_t top = -1, left = -1, h = -1, w = -1;  // where the plane goes (the padding is the rest)
  std::vector<float> data;

  // Sizes the buffer for g, zeroed; kept as it is when the last call had the same geometry (the
  // padding is still zero: fill() writes only the plane's own place).
  // The padded plane's rows and floats per row for g. Each is at most the padded input's extent
  // plus a block (the window geometry was checked: every factor below 2^40), so neither wraps.
  static std::pair<int64_t, int64_t> size_for(const WindowGeometry& g) {
    const int64_t blocks = (g.ow + 15) / 16;
    // Last column read: lane 15 of the last block at the last tap, plus the odd partner that
    // stride 2's paired load brings in.
    const int64_t last_col = (blocks * 16 - 1) * g.sw + (g.kw - 1) * g.dw + (g.sw - 1);
    const int64_t last_row = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh;
    return {std::max(last_row + 1, g.top + g.h), std::max(last_col + 1, g.left + g.w)};
  }

  // Whether the padded copy is worth making: not when the padding dwarfs the plane (a window of
  // padding 2^35 with a stride to match has a few outputs and a padded plane of terabytes; the
  // scalar path reads the taps in place instead).
  static bool fits(const WindowGeometry& g) {
    const auto [padded_rows, padded_stride] = size_for(g);
    const std::optional<int64_t> floats = ir::checked_mul(padded_rows, padded_stride);
    return floats && *floats <= 4 * g.h * g.w + (int64_t{1} << 16);
  }

  void prepare(const WindowGeometry& g) {
    const auto [new_rows, new_stride] = size_for(g);
    if (new_stride == stride && new_rows == rows && g.top == top && g.left == left && g.h == h &&
        g.w == w) {
      return;
    }
    stride = new_stride, rows = new_rows, top = g.top, left = g.left, h = g.h, w = g.w;
    data.assign(size_t(rows * stride), 0.0f);
  }

  // Copies plane x into its place; the padding stays zero.
  void fill(const float* x) {
    for (int64_t iy = 0; iy < h; ++iy) {
      const float* from = x + iy * w;
      float* to = data.data() + (iy + top) * stride + left;
      int64_t i = 0;
      for (; i + 16 <= w; i += 16) _mm512_storeu_ps(to + i, _mm512_loadu_ps(from + i));
      const __mmask16 tail = __mmask16((1u << (w - i)) - 1);
      _mm512_mask_storeu_ps(to + i, tail, _mm512_maskz_loadu_ps(tail, from + i));
    }
  }
};

// J blocks of 16 outputs at once, each its own accumulator, so J FMA chains are in flight instead
// of one (a single chain of kh * kw dependent FMAs left the core waiting on their latency). Per
// lane: taps in (ky, kx) order from 0, + bias, the activation, as output_at.
template <int J, int kStride, int kKw>
void blocks(const PaddedPlane& padded, const float* weight, float bias, const WindowGeometry& g,
            const int64_t* oy, const int64_t* ox, const DirectActivation& activation, float* y) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  // kKw: the window's width when known at compile time (3, mobilenet's: the loop over it
  // unrolls), else 0.
  const int64_t kh = g.kh, kw = kKw > 0 ? kKw : g.kw, dw = g.dw, stride = padded.stride;
  const float* base[J];
  for (int j = 0; j < J; ++j)
    base[j] = padded.data.data() + oy[j] * g.sh * stride + ox[j] * kStride;
  __m512 acc[J];
  for (int j = 0; j < J; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t ky = 0; ky < kh; ++ky) {
    const int64_t row = ky * g.dh * stride;
    for (int64_t kx = 0; kx < kw; ++kx) {
      const __m512 wv = _mm512_set1_ps(weight[ky * kw + kx]);
      for (int j = 0; j < J; ++j) {
        const float* p = base[j] + row + kx * dw;
        __m512 in;
        if constexpr (kStride == 1) {
          in = _mm512_loadu_ps(p);
        } else {
          in = _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + 16));
        }
        acc[j] = _mm512_fmadd_ps(wv, in, acc[j]);
      }
    }
  }
  for (int j = 0; j < J; ++j) {
    __m512 v = _mm512_add_ps(acc[j], _mm512_set1_ps(bias));
    if (activation.kind == DirectActivation::Kind::kRelu) {
      v = _mm512_max_ps(v, _mm512_setzero_ps());
    } else if (activation.kind == DirectActivation::Kind::kClip) {
      v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(activation.lo)),
                        _mm512_set1_ps(activation.hi));
    }
    const int64_t n = std::min<int64_t>(16, g.ow - ox[j]);
    _mm512_mask_storeu_ps(y + oy[j] * g.ow + ox[j], __mmask16((1u << n) - 1), v);
  }
}

template <int kStride, int kKw>
void plane_blocks(const PaddedPlane& padded, const float* weight, float bias,
                  const WindowGeometry& g, const DirectActivation& activation, float* y) {
  constexpr int kJ = 4;
  int64_t oy[kJ], ox[kJ];
  int count = 0;
  for (int64_t r = 0; r < g.oh; ++r) {
    for (int64_t c = 0; c < g.ow; c += 16) {
      oy[count] = r, ox[count] = c;
      if (++count == kJ) {
        blocks<kJ, kStride, kKw>(padded, weight, bias, g, oy, ox, activation, y);
        count = 0;
      }
    }
  }
  for (int j = 0; j < count; ++j) {
    blocks<1, kStride, kKw>(padded, weight, bias, g, oy + j, ox + j, activation, y);
  }
}

void convolve_plane_vectors(PaddedPlane& padded, const float* x, const float* weight, float bias,
                            float* y, const WindowGeometry& g, const DirectActivation& activation) {
  padded.fill(x);
  if (g.kw == 3) {
    return g.sw == 1 ? plane_blocks<1, 3>(padded, weight, bias, g, activation, y)
                     : plane_blocks<2, 3>(padded, weight, bias, g, activation, y);
  }
  return g.sw == 1 ? plane_blocks<1, 0>(padded, weight, bias, g, activation, y)
                   : plane_blocks<2, 0>(padded, weight, bias, g, activation, y);
}
#endif

void convolve_plane_scalar(const float* x, const float* weight, float bias, float* y,
                           const WindowGeometry& g, const DirectActivation& activation) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      y[oy * g.ow + ox] = output_at(x, weight, bias, g, oy, ox, activation);
    }
  }
}

}  // namespace

void depthwise_conv2d_nchw(const float* x, const float* weight, const float* bias, float* y,
                           const WindowGeometry& g, const DirectActivation& activation) {
  const int64_t planes = g.batch * g.channels;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // A few planes per chunk: a 7x7 plane is too little work to be a task of its own.
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(out_plane, 1));
  parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
#if defined(__AVX512F__)
    // Strides 1 and 2 run sixteen outputs at a time; others (rare) one by one, and so do planes
    // whose padding would make the padded copy far larger than the plane.
    if ((g.sw == 1 || g.sw == 2) && PaddedPlane::fits(g)) {
      // Per thread, kept between calls: a convolution of the same geometry (the next image, the
      // next run) finds its zeroed padding in place.
      thread_local PaddedPlane per_thread;
      PaddedPlane& padded = per_thread;  // one TLS lookup, not one per use
      padded.prepare(g);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % g.channels;
        convolve_plane_vectors(padded, x + p * in_plane, weight + c * g.kh * g.kw,
                               bias ? bias[c] : 0.0f, y + p * out_plane, g, activation);
      }
      return;
    }
#endif
    for (int64_t p = begin; p < end; ++p) {
      const int64_t c = p % g.channels;
      convolve_plane_scalar(x + p * in_plane, weight + c * g.kh * g.kw, bias ? bias[c] : 0.0f,
                            y + p * out_plane, g, activation);
    }
  });
}

}  // namespace mf::runtime::ops
