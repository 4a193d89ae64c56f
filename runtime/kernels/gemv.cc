#include "runtime/kernels/gemv.h"

#include <algorithm>

#include "runtime/parallel.h"

#if defined(__AVX512F__)
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
