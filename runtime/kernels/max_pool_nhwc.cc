#include "runtime/kernels/max_pool_nhwc.h"

#include <algorithm>
#include <limits>

#include "runtime/parallel.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

// The vector the blocked kernel runs on: sixteen lanes with AVX-512, eight with AVX2. Its max is
// vmaxps(v, acc), v > acc ? v : acc: std::max(acc, v), NaN included, as the scalar path.
#if defined(__AVX512F__)
struct Lanes {
  static constexpr int64_t kWidth = 16;
  using V = __m512;
  static V lowest() { return _mm512_set1_ps(-std::numeric_limits<float>::infinity()); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V max(V v, V acc) { return _mm512_max_ps(v, acc); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};
#define MF_MAX_POOL_BLOCKS 1
#elif defined(__AVX2__)
struct Lanes {
  static constexpr int64_t kWidth = 8;
  using V = __m256;
  static V lowest() { return _mm256_set1_ps(-std::numeric_limits<float>::infinity()); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V max(V v, V acc) { return _mm256_max_ps(v, acc); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
#define MF_MAX_POOL_BLOCKS 1
#endif

// Output pixel (n, oy, ox): every channel, sixteen at a time, the last block masked.
void pool_pixel(const float* x, float* out, const WindowGeometry& g, int64_t n, int64_t oy,
                int64_t ox) {
  const int64_t y0 = oy * g.sh - g.top, x0 = ox * g.sw - g.left;
  const int64_t ylo = std::max<int64_t>(0, y0), yhi = std::min(g.h, y0 + g.kh);
  const int64_t xlo = std::max<int64_t>(0, x0), xhi = std::min(g.w, x0 + g.kw);
  const float* image = x + n * g.h * g.w * g.channels;
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c < g.channels; c += 16) {
    const int64_t left = g.channels - c;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    __m512 acc = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t iy = ylo; iy < yhi; ++iy) {
      for (int64_t ix = xlo; ix < xhi; ++ix) {
        const __m512 v = _mm512_maskz_loadu_ps(m, image + (iy * g.w + ix) * g.channels + c);
        // vmaxps(v, acc) is v > acc ? v : acc: std::max(acc, v), NaN included.
        acc = _mm512_max_ps(v, acc);
      }
    }
    _mm512_mask_storeu_ps(out + c, m, acc);
  }
#endif
  for (; c < g.channels; ++c) {
    float acc = -std::numeric_limits<float>::infinity();
    for (int64_t iy = ylo; iy < yhi; ++iy) {
      for (int64_t ix = xlo; ix < xhi; ++ix) {
        acc = std::max(acc, image[(iy * g.w + ix) * g.channels + c]);
      }
    }
    out[c] = acc;
  }
}

#if defined(MF_MAX_POOL_BLOCKS)
// kBlocks blocks of kWidth channels from c of output pixel (n, oy, ox), each its own running max,
// so kBlocks max chains are in flight instead of one: a single chain per block waited on the max's
// latency at every tap (resnet18's pool, 64 channels over 112x112: 155 us, BM_MaxPool). Per
// channel the taps are visited in the same (iy, ix) order as pool_pixel: the same results, NaNs
// included.
template <int kBlocks>
void pool_blocks(const float* x, float* out, const WindowGeometry& g, int64_t n, int64_t oy,
                 int64_t ox, int64_t c) {
  constexpr int64_t w = Lanes::kWidth;
  const int64_t y0 = oy * g.sh - g.top, x0 = ox * g.sw - g.left;
  const int64_t ylo = std::max<int64_t>(0, y0), yhi = std::min(g.h, y0 + g.kh);
  const int64_t xlo = std::max<int64_t>(0, x0), xhi = std::min(g.w, x0 + g.kw);
  const float* image = x + n * g.h * g.w * g.channels + c;
  Lanes::V acc[kBlocks];
  for (int b = 0; b < kBlocks; ++b) acc[b] = Lanes::lowest();
  for (int64_t iy = ylo; iy < yhi; ++iy) {
    for (int64_t ix = xlo; ix < xhi; ++ix) {
      const float* p = image + (iy * g.w + ix) * g.channels;
      for (int b = 0; b < kBlocks; ++b) acc[b] = Lanes::max(Lanes::load(p + w * b), acc[b]);
    }
  }
  for (int b = 0; b < kBlocks; ++b) Lanes::store(out + c + w * b, acc[b]);
}

// The last `blocks` (< 8) blocks from c: pool_blocks with that many chains.
template <int kMax>
void pool_last_blocks(const float* x, float* out, const WindowGeometry& g, int64_t n, int64_t oy,
                      int64_t ox, int64_t c, int64_t blocks) {
  if constexpr (kMax > 0) {
    if (blocks == kMax) return pool_blocks<kMax>(x, out, g, n, oy, ox, c);
    pool_last_blocks<kMax - 1>(x, out, g, n, oy, ox, c, blocks);
  }
}

// Every channel of the pixel, eight blocks at a time; `channels` is a multiple of the width.
void pool_pixel_blocks(const float* x, float* out, const WindowGeometry& g, int64_t n, int64_t oy,
                       int64_t ox) {
  constexpr int64_t w = Lanes::kWidth;
  int64_t c = 0;
  for (; c + 8 * w <= g.channels; c += 8 * w) pool_blocks<8>(x, out, g, n, oy, ox, c);
  pool_last_blocks<7>(x, out, g, n, oy, ox, c, (g.channels - c) / w);
}
#endif

}  // namespace

void max_pool2d_nhwc_f32(const float* x, float* y, const WindowGeometry& g) {
  const int64_t rows = g.batch * g.oh;
  // A few output rows per chunk: a 13-pixel row of 512 channels is little work on its own.
  const int64_t grain =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.ow * g.channels * g.kh * g.kw));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.oh, oy = r % g.oh;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float* out = y + ((n * g.oh + oy) * g.ow + ox) * g.channels;
#if defined(MF_MAX_POOL_BLOCKS)
        if (g.channels % Lanes::kWidth == 0) {
          pool_pixel_blocks(x, out, g, n, oy, ox);
          continue;
        }
#endif
        pool_pixel(x, out, g, n, oy, ox);
      }
    }
  });
}

}  // namespace mf::runtime::ops
