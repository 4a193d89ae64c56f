#include "runtime/kernels/transpose_tiles.h"

#include <algorithm>

#include "base/error.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

constexpr int64_t kTile = 16;

// Fewer columns than a tile (an RGB input going channels-last: 3): each output row takes one
// element from each of `cols` source columns, all read front to back. kCols > 0 fixes the count
// at compile time so the inner loop unrolls.
template <typename E, int64_t kCols>
void transpose_narrow(const E* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                      E* dst) {
  const int64_t n = kCols > 0 ? kCols : cols;
  for (int64_t a = row_begin; a < row_end; ++a) {
    for (int64_t b = 0; b < n; ++b) dst[a * n + b] = src[a + b * ld];
  }
}

// 16 x 16 tiles element by element: the rows of a tile are whole cache lines for 4-byte elements.
template <typename E>
void transpose_tiled(const E* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                     E* dst) {
  for (int64_t a0 = row_begin; a0 < row_end; a0 += kTile) {
    const int64_t a1 = std::min(row_end, a0 + kTile);
    for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
      const int64_t b1 = std::min(cols, b0 + kTile);
      for (int64_t a = a0; a < a1; ++a) {
        for (int64_t b = b0; b < b1; ++b) dst[a * cols + b] = src[a + b * ld];
      }
    }
  }
}

template <typename E>
void transpose_any(const E* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                   E* dst) {
  if (cols == 3) return transpose_narrow<E, 3>(src, ld, row_begin, row_end, cols, dst);
  if (cols == 4) return transpose_narrow<E, 4>(src, ld, row_begin, row_end, cols, dst);
  if (cols < kTile) return transpose_narrow<E, 0>(src, ld, row_begin, row_end, cols, dst);
  transpose_tiled(src, ld, row_begin, row_end, cols, dst);
}

#if defined(__AVX512F__)
// Transposes 16 rows of 16 lanes in registers: r[i] lane j becomes r[j] lane i. Pairs of lanes,
// then of pairs, then of 128-bit quarters, then of halves are exchanged (4 x 16 shuffles).
void transpose_16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int i = 0; i < 16; i += 8) {
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0xdd);
    }
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
  }
}

__mmask16 first_lanes(int64_t n) {
  return n >= kTile ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// 4-byte elements (any dtype: only bits move) through registers, 16 x 16 at a time; the edges of
// the matrix are masked loads and stores, never reads past either tensor.
void transpose_4byte(const float* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                     float* dst) {
  for (int64_t a0 = row_begin; a0 < row_end; a0 += kTile) {
    const int64_t rows = std::min(kTile, row_end - a0);
    const __mmask16 row_mask = first_lanes(rows);
    for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
      const int64_t width = std::min(kTile, cols - b0);
      __m512 r[16];
      for (int64_t b = 0; b < kTile; ++b) {
        r[b] = b < width ? _mm512_maskz_loadu_ps(row_mask, src + a0 + (b0 + b) * ld)
                         : _mm512_setzero_ps();
      }
      transpose_16x16(r);
      const __mmask16 col_mask = first_lanes(width);
      for (int64_t a = 0; a < rows; ++a) {
        _mm512_mask_storeu_ps(dst + (a0 + a) * cols + b0, col_mask, r[a]);
      }
    }
  }
}
#endif

}  // namespace

void transpose_rows(const void* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                    size_t elem_size, void* dst) {
  switch (elem_size) {
    case 1:
      return transpose_any(static_cast<const uint8_t*>(src), ld, row_begin, row_end, cols,
                           static_cast<uint8_t*>(dst));
    case 4:
#if defined(__AVX512F__)
      if (cols >= kTile) {
        return transpose_4byte(static_cast<const float*>(src), ld, row_begin, row_end, cols,
                               static_cast<float*>(dst));
      }
#endif
      return transpose_any(static_cast<const uint32_t*>(src), ld, row_begin, row_end, cols,
                           static_cast<uint32_t*>(dst));
    case 8:
      return transpose_any(static_cast<const uint64_t*>(src), ld, row_begin, row_end, cols,
                           static_cast<uint64_t*>(dst));
  }
  MF_FAIL(Internal, "transpose_rows: unsupported element size ", elem_size);
}

}  // namespace mf::runtime::ops
