#include "runtime/kernels/gemv.h"

#include <algorithm>

#include "runtime/parallel.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

// Outputs per chunk: a chunk reads that many rows (or columns) of b, enough to amortize the
// task, few enough to spread 1000 outputs over the threads.
constexpr int64_t kOutputsPerChunk = 64;

#if defined(__AVX512F__)
__mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

// Four dot products at once (four independent chains), each over k in 16-lane blocks, the last
// masked; each output's partial sums combine in _mm512_reduce_add_ps's fixed order.
void dot_rows(const float* a, const float* b, float* y, int64_t k, int64_t first, int64_t last) {
  int64_t row = first;
  for (; row + 4 <= last; row += 4) {
    const float* r = b + row * k;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < k; i += 16) {
      const __mmask16 m = first_lanes(k - i);
      const __m512 x = _mm512_maskz_loadu_ps(m, a + i);
      s0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, r + i), s0);
      s1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, r + k + i), s1);
      s2 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, r + 2 * k + i), s2);
      s3 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, r + 3 * k + i), s3);
    }
    y[row] = _mm512_reduce_add_ps(s0);
    y[row + 1] = _mm512_reduce_add_ps(s1);
    y[row + 2] = _mm512_reduce_add_ps(s2);
    y[row + 3] = _mm512_reduce_add_ps(s3);
  }
  for (; row < last; ++row) {
    // The same chain as a lane of the four-row loop.
    const float* r = b + row * k;
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 16) {
      const __mmask16 m = first_lanes(k - i);
      s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, r + i), s);
    }
    y[row] = _mm512_reduce_add_ps(s);
  }
}

// Columns [first, last) of a (k, n) b: y[j] = sum over i in order of a[i] * b[i][j].
void axpy_columns(const float* a, const float* b, float* y, int64_t k, int64_t n, int64_t first,
                  int64_t last) {
  for (int64_t j = first; j < last; j += 16) {
    const __mmask16 m = first_lanes(last - j);
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; ++i) {
      s = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), _mm512_maskz_loadu_ps(m, b + i * n + j), s);
    }
    _mm512_mask_storeu_ps(y + j, m, s);
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
// Eight lanes: the same kernels as the sixteen-lane ones above, for CPUs without AVX-512. The
// scalar loops below are not vectorized by the compiler (a float sum may not be reordered), which
// left a 9216 x 4096 classifier at a quarter of the memory bandwidth.

// The first `count` lanes set (all eight from eight on).
__m256i first_lanes(int64_t count) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(count, 8))), lane);
}

// The eight lanes' sum in a fixed tree.
float sum_lanes(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

// Four dot products at once, each over k in 8-lane blocks, the last masked (a masked load reads
// nothing past the row).
void dot_rows(const float* a, const float* b, float* y, int64_t k, int64_t first, int64_t last) {
  const int64_t full = k / 8 * 8;
  const __m256i tail = first_lanes(k - full);
  int64_t row = first;
  for (; row + 4 <= last; row += 4) {
    const float* r = b + row * k;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < full; i += 8) {
      const __m256 x = _mm256_loadu_ps(a + i);
      s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r + i), s0);
      s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r + k + i), s1);
      s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r + 2 * k + i), s2);
      s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r + 3 * k + i), s3);
    }
    if (full < k) {
      const __m256 x = _mm256_maskload_ps(a + full, tail);
      s0 = _mm256_fmadd_ps(x, _mm256_maskload_ps(r + full, tail), s0);
      s1 = _mm256_fmadd_ps(x, _mm256_maskload_ps(r + k + full, tail), s1);
      s2 = _mm256_fmadd_ps(x, _mm256_maskload_ps(r + 2 * k + full, tail), s2);
      s3 = _mm256_fmadd_ps(x, _mm256_maskload_ps(r + 3 * k + full, tail), s3);
    }
    y[row] = sum_lanes(s0);
    y[row + 1] = sum_lanes(s1);
    y[row + 2] = sum_lanes(s2);
    y[row + 3] = sum_lanes(s3);
  }
  for (; row < last; ++row) {
    // The same chain as a lane of the four-row loop.
    const float* r = b + row * k;
    __m256 s = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 8) {
      s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(r + i), s);
    }
    if (full < k) {
      s = _mm256_fmadd_ps(_mm256_maskload_ps(a + full, tail), _mm256_maskload_ps(r + full, tail),
                          s);
    }
    y[row] = sum_lanes(s);
  }
}

// Columns [first, last) of a (k, n) b, at most kOutputsPerChunk of them: y[j] = sum over i in
// order of a[i] * b[i][j]. All the chunk's columns accumulate together, so each row of b is read
// as one contiguous run (a column block at a time would stride through b once per block).
void axpy_columns(const float* a, const float* b, float* y, int64_t k, int64_t n, int64_t first,
                  int64_t last) {
  constexpr int kMaxBlocks = kOutputsPerChunk / 8;
  for (int64_t begin = first; begin < last; begin += kOutputsPerChunk) {
    const int64_t end = std::min(last, begin + kOutputsPerChunk);
    const int blocks = static_cast<int>((end - begin + 7) / 8);
    __m256i mask[kMaxBlocks];
    __m256 s[kMaxBlocks];
    for (int q = 0; q < blocks; ++q) {
      mask[q] = first_lanes(end - begin - 8 * q);
      s[q] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < k; ++i) {
      const __m256 x = _mm256_set1_ps(a[i]);
      const float* r = b + i * n + begin;
      for (int q = 0; q < blocks; ++q) {
        s[q] = _mm256_fmadd_ps(x, _mm256_maskload_ps(r + 8 * q, mask[q]), s[q]);
      }
    }
    for (int q = 0; q < blocks; ++q) _mm256_maskstore_ps(y + begin + 8 * q, mask[q], s[q]);
  }
}
#else
void dot_rows(const float* a, const float* b, float* y, int64_t k, int64_t first, int64_t last) {
  for (int64_t row = first; row < last; ++row) {
    float s = 0.0f;
    for (int64_t i = 0; i < k; ++i) s += a[i] * b[row * k + i];
    y[row] = s;
  }
}

void axpy_columns(const float* a, const float* b, float* y, int64_t k, int64_t n, int64_t first,
                  int64_t last) {
  for (int64_t j = first; j < last; ++j) {
    float s = 0.0f;
    for (int64_t i = 0; i < k; ++i) s += a[i] * b[i * n + j];
    y[j] = s;
  }
}
#endif

}  // namespace

void gemv_f32(const float* a, const float* b, const float* bias, float* y, int64_t k, int64_t n,
              bool b_transposed) {
  parallel_for(n, kOutputsPerChunk, [&](int64_t first, int64_t last) {
    if (b_transposed) {
      dot_rows(a, b, y, k, first, last);
    } else {
      axpy_columns(a, b, y, k, n, first, last);
    }
    if (bias != nullptr) {
      for (int64_t j = first; j < last; ++j) y[j] += bias[j];
    }
  });
}

}  // namespace mf::runtime::ops
