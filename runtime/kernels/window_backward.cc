#include "runtime/kernels/window_backward.h"

#include <Eigen/Core>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Strided = Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>>;

// Planes per parallel chunk so that a chunk touches about 2^15 elements.
int64_t planes_per_chunk(int64_t plane) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, plane));
}

// The output positions o in [0, out) whose window tap `k` (of stride s, dilation d, padding
// `before`) reads input row or column i = o s - before + k d inside [0, size): [first, last).
struct TapRange {
  int64_t first = 0, last = 0;
};
TapRange tap_range(int64_t k, int64_t s, int64_t d, int64_t before, int64_t size, int64_t out) {
  const int64_t offset = k * d - before;  // i = o s + offset
  // o s + offset >= 0  <=>  o >= ceil(-offset / s)
  int64_t first = offset >= 0 ? 0 : (-offset + s - 1) / s;
  // o s + offset < size  <=>  o <= (size - 1 - offset) / s
  int64_t last = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / s + 1;
  first = std::min(first, out);
  last = std::clamp(last, first, out);
  return {first, last};
}

}  // namespace

// Each (image, input channel) plane of dx is one task's: the products of the channel's weights
// with dy, (kh kw x og) times (og x oh ow) as one GEMM, then added at the positions they came from
// (col2im), in a fixed order.
template <typename T>
void conv2d_backward_data(const WindowGeometry& g, int64_t out_channels, int64_t groups,
                          const T* dy, const T* weight, T* dx) {
  const int64_t cg = g.channels / groups, og = out_channels / groups;
  const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow, taps = g.kh * g.kw;
  parallel_for(g.batch * g.channels, planes_per_chunk(og * taps * out_plane + plane),
               [&](int64_t begin, int64_t end) {
                 RowMatrix<T> cols;
                 for (int64_t p = begin; p < end; ++p) {
                   const int64_t n = p / g.channels, channel = p % g.channels;
                   const int64_t group = channel / cg, c = channel % cg;
                   const Strided<T> w(weight + (group * og * cg + c) * taps, og, taps,
                                      Eigen::OuterStride<>(cg * taps));
                   const Strided<T> grad(dy + (n * out_channels + group * og) * out_plane, og,
                                         out_plane, Eigen::OuterStride<>(out_plane));
                   cols.noalias() = w.transpose() * grad;
                   T* out = dx + p * plane;
                   std::fill(out, out + plane, T(0));
                   for (int64_t i = 0; i < g.kh; ++i) {
                     const TapRange rows = tap_range(i, g.sh, g.dh, g.top, g.h, g.oh);
                     for (int64_t j = 0; j < g.kw; ++j) {
                       const TapRange columns = tap_range(j, g.sw, g.dw, g.left, g.w, g.ow);
                       const T* from = cols.data() + (i * g.kw + j) * out_plane;
                       for (int64_t oy = rows.first; oy < rows.last; ++oy) {
                         const int64_t row =
                             (oy * g.sh - g.top + i * g.dh) * g.w - g.left + j * g.dw;
                         for (int64_t ox = columns.first; ox < columns.last; ++ox) {
                           out[row + ox * g.sw] += from[oy * g.ow + ox];
                         }
                       }
                     }
                   }
                 }
               });
}

// Each input channel's slice of dw (og x kh kw) is one task's: the sum over images, in order, of
// dy (og x oh ow) times the channel's im2col (oh ow x kh kw), one GEMM per image.
template <typename T>
void conv2d_backward_weights(const WindowGeometry& g, int64_t out_channels, int64_t groups,
                             const T* x, const T* dy, T* dw) {
  const int64_t cg = g.channels / groups, og = out_channels / groups;
  const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow, taps = g.kh * g.kw;
  parallel_for(g.channels, planes_per_chunk(g.batch * og * taps * out_plane),
               [&](int64_t begin, int64_t end) {
                 RowMatrix<T> cols(taps, out_plane), sum(og, taps);
                 for (int64_t channel = begin; channel < end; ++channel) {
                   const int64_t group = channel / cg, c = channel % cg;
                   sum.setZero();
                   for (int64_t n = 0; n < g.batch; ++n) {
                     // Row (i, j) of cols: x at every output position's tap (i, j), 0 in the
                     // padding.
                     const T* image = x + (n * g.channels + channel) * plane;
                     cols.setZero();
                     for (int64_t i = 0; i < g.kh; ++i) {
                       const TapRange rows = tap_range(i, g.sh, g.dh, g.top, g.h, g.oh);
                       for (int64_t j = 0; j < g.kw; ++j) {
                         const TapRange columns = tap_range(j, g.sw, g.dw, g.left, g.w, g.ow);
                         T* to = cols.data() + (i * g.kw + j) * out_plane;
                         for (int64_t oy = rows.first; oy < rows.last; ++oy) {
                           const int64_t row =
                               (oy * g.sh - g.top + i * g.dh) * g.w - g.left + j * g.dw;
                           for (int64_t ox = columns.first; ox < columns.last; ++ox) {
                             to[oy * g.ow + ox] = image[row + ox * g.sw];
                           }
                         }
                       }
                     }
                     const Strided<T> grad(dy + (n * out_channels + group * og) * out_plane, og,
                                           out_plane, Eigen::OuterStride<>(out_plane));
                     sum.noalias() += grad * cols.transpose();
                   }
                   for (int64_t o = 0; o < og; ++o) {
                     std::copy(sum.data() + o * taps, sum.data() + (o + 1) * taps,
                               dw + ((group * og + o) * cg + c) * taps);
                   }
                 }
               });
}

// The plane offset of the largest input of output (oy, ox)'s window, the first on ties (as the
// forward picks it); a window of -inf and NaN only gives its first cell; -1 for a window wholly in
// the padding.
template <typename T>
inline int64_t window_argmax(const WindowGeometry& g, const T* in, int64_t oy, int64_t ox) {
  int64_t first = -1, best = -1;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = oy * g.sh - g.top + i;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ix = ox * g.sw - g.left + j;
      if (ix < 0 || ix >= g.w) continue;
      const int64_t at = iy * g.w + ix;
      if (first < 0) first = at;
      if (best < 0 ? in[at] > -std::numeric_limits<T>::infinity() : in[at] > in[best]) best = at;
    }
  }
  return best >= 0 ? best : first;
}

// window_argmax for windows wholly inside the plane, each output's gradient stored at its argmax:
// KH, KW fix the window's size at compile time (0: g's).
template <typename T, int KH, int KW>
void store_at_argmax(const WindowGeometry& g, const T* in, const T* grad, T* out) {
  const int64_t kh = KH > 0 ? KH : g.kh, kw = KW > 0 ? KW : g.kw;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t base = oy * g.sh * g.w + ox * g.sw;
      int64_t best = -1;
      for (int64_t i = 0; i < kh; ++i) {
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t at = base + i * g.w + j;
          if (best < 0 ? in[at] > -std::numeric_limits<T>::infinity() : in[at] > in[best]) {
            best = at;
          }
        }
      }
      out[best >= 0 ? best : base] = grad[oy * g.ow + ox];
    }
  }
}

// One window of store_at_argmax_2x2_stride_2: cells a b over d e. took_k says cell k beat every
// earlier cell, starting from -inf (so NaN and -inf never win), and the last cell that did is the
// window's; with none, the first. Written without branches: random data mispredicts them half the
// time.
template <typename T>
void store_2x2_window(const T* top, const T* bottom, T value, T* out_top, T* out_bottom) {
  const T a = top[0], b = top[1], d = bottom[0], e = bottom[1];
  const T v0 = -std::numeric_limits<T>::infinity();
  const T v1 = a > v0 ? a : v0;
  const bool took_b = b > v1;
  const T v2 = took_b ? b : v1;
  const bool took_d = d > v2;
  const T v3 = took_d ? d : v2;
  const bool took_e = e > v3;
  out_bottom[1] = took_e ? value : T(0);
  out_bottom[0] = took_d && !took_e ? value : T(0);
  out_top[1] = took_b && !took_d && !took_e ? value : T(0);
  out_top[0] = !took_b && !took_d && !took_e ? value : T(0);
}

#if defined(__AVX2__)
// Eight windows of store_2x2_window at once: the rows' even and odd cells split apart (in the
// window order 0 1 4 5 2 3 6 7 that the in-lane shuffle gives; dy is permuted to match), the same
// comparisons as masks, and the results interleaved back, which restores the cells' order.
void store_2x2_windows_avx2(const float* top, const float* bottom, const float* dy, float* out_top,
                            float* out_bottom) {
  const auto split = [](const float* row, __m256& even, __m256& odd) {
    const __m256 lo = _mm256_loadu_ps(row), hi = _mm256_loadu_ps(row + 8);
    even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    odd = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  };
  __m256 a, b, d, e;
  split(top, a, b);
  split(bottom, d, e);
  const __m256 value = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(dy)), _MM_SHUFFLE(3, 1, 2, 0)));
  const __m256 v0 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 v1 = _mm256_blendv_ps(v0, a, _mm256_cmp_ps(a, v0, _CMP_GT_OQ));
  const __m256 took_b = _mm256_cmp_ps(b, v1, _CMP_GT_OQ);
  const __m256 v2 = _mm256_blendv_ps(v1, b, took_b);
  const __m256 took_d = _mm256_cmp_ps(d, v2, _CMP_GT_OQ);
  const __m256 v3 = _mm256_blendv_ps(v2, d, took_d);
  const __m256 took_e = _mm256_cmp_ps(e, v3, _CMP_GT_OQ);
  const __m256 later_d = _mm256_or_ps(took_d, took_e);
  const __m256 later_b = _mm256_or_ps(took_b, later_d);
  const __m256 out_e = _mm256_and_ps(took_e, value);
  const __m256 out_d = _mm256_andnot_ps(took_e, _mm256_and_ps(took_d, value));
  const __m256 out_b = _mm256_andnot_ps(later_d, _mm256_and_ps(took_b, value));
  const __m256 out_a = _mm256_andnot_ps(later_b, value);
  _mm256_storeu_ps(out_top, _mm256_unpacklo_ps(out_a, out_b));
  _mm256_storeu_ps(out_top + 8, _mm256_unpackhi_ps(out_a, out_b));
  _mm256_storeu_ps(out_bottom, _mm256_unpacklo_ps(out_d, out_e));
  _mm256_storeu_ps(out_bottom + 8, _mm256_unpackhi_ps(out_d, out_e));
}
#endif

// store_at_argmax for 2x2 windows of stride 2 (most networks' pools), writing every cell of the
// plane once (each window's four cells, then what no window reads) instead of clearing the plane
// and storing at the argmax: on LeNet5's 64 x 6 x 28 x 28, one thread, 1.38 -> 0.12 ms.
template <typename T>
void store_at_argmax_2x2_stride_2(const WindowGeometry& g, const T* in, const T* grad, T* out) {
  const int64_t w = g.w;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const T* top = in + 2 * oy * w;
    const T* bottom = top + w;
    T* out_top = out + 2 * oy * w;
    T* out_bottom = out_top + w;
    const T* row_grad = grad + oy * g.ow;
    int64_t ox = 0;
#if defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>) {
      for (; ox + 8 <= g.ow; ox += 8) {
        store_2x2_windows_avx2(top + 2 * ox, bottom + 2 * ox, row_grad + ox, out_top + 2 * ox,
                               out_bottom + 2 * ox);
      }
      // The last eight windows again, overlapping the loop's last (each store is idempotent):
      // the scalar tail cost more than the vector loop on 14-wide rows.
      if (ox < g.ow && g.ow >= 8) {
        ox = g.ow - 8;
        store_2x2_windows_avx2(top + 2 * ox, bottom + 2 * ox, row_grad + ox, out_top + 2 * ox,
                               out_bottom + 2 * ox);
        ox = g.ow;
      }
    }
#endif
    for (; ox < g.ow; ++ox) {
      store_2x2_window(top + 2 * ox, bottom + 2 * ox, row_grad[ox], out_top + 2 * ox,
                       out_bottom + 2 * ox);
    }
    std::fill(out_top + 2 * g.ow, out_top + w, T(0));
    std::fill(out_bottom + 2 * g.ow, out_bottom + w, T(0));
  }
  std::fill(out + 2 * g.oh * w, out + g.h * w, T(0));
}

template <typename T>
void max_pool2d_backward(const WindowGeometry& g, const T* x, const T* dy, T* dx) {
  const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  // Windows that never overlap (stride >= kernel, as in most networks): each input takes at most
  // one window's gradient, so it is stored, not summed (the same bits as the sum of one term).
  if (g.sh >= g.kh && g.sw >= g.kw) {
    // Every window wholly inside the input (no padding reached): no bounds checks.
    const bool inside = g.top == 0 && g.left == 0 && (g.oh - 1) * g.sh + g.kh <= g.h &&
                        (g.ow - 1) * g.sw + g.kw <= g.w;
    parallel_for(g.batch * g.channels, planes_per_chunk(plane + out_plane * g.kh * g.kw),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t p = begin; p < end; ++p) {
                     const T* in = x + p * plane;
                     T* out = dx + p * plane;
                     const T* grad = dy + p * out_plane;
                     if (inside && g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2) {
                       store_at_argmax_2x2_stride_2<T>(g, in, grad, out);
                       continue;
                     }
                     std::fill(out, out + plane, T(0));
                     if (inside && g.kh == 2 && g.kw == 2) {
                       store_at_argmax<T, 2, 2>(g, in, grad, out);
                     } else if (inside) {
                       store_at_argmax<T, 0, 0>(g, in, grad, out);
                     } else {
                       for (int64_t oy = 0; oy < g.oh; ++oy) {
                         for (int64_t ox = 0; ox < g.ow; ++ox) {
                           const int64_t to = window_argmax(g, in, oy, ox);
                           if (to >= 0) out[to] = grad[oy * g.ow + ox];
                         }
                       }
                     }
                   }
                 });
    return;
  }
  parallel_for(g.batch * g.channels, planes_per_chunk(plane + out_plane * g.kh * g.kw),
               [&](int64_t begin, int64_t end) {
                 std::vector<double> acc(plane);
                 for (int64_t p = begin; p < end; ++p) {
                   const T* in = x + p * plane;
                   std::fill(acc.begin(), acc.end(), 0.0);
                   for (int64_t oy = 0; oy < g.oh; ++oy) {
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       const int64_t to = window_argmax(g, in, oy, ox);
                       if (to >= 0)
                         acc[to] += static_cast<double>(dy[p * out_plane + oy * g.ow + ox]);
                     }
                   }
                   std::copy(acc.begin(), acc.end(), dx + p * plane);
                 }
               });
}

template <typename T>
void max_pool2d_select(const WindowGeometry& g, const T* x, const T* grad, T* y) {
  const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  parallel_for(g.batch * g.channels, planes_per_chunk(plane + out_plane * g.kh * g.kw),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p) {
                   const T* in = x + p * plane;
                   for (int64_t oy = 0; oy < g.oh; ++oy) {
                     for (int64_t ox = 0; ox < g.ow; ++ox) {
                       const int64_t from = window_argmax(g, in, oy, ox);
                       y[p * out_plane + oy * g.ow + ox] =
                           from >= 0 ? grad[p * plane + from] : T(0);
                     }
                   }
                 }
               });
}

template <typename T>
void avg_pool2d_backward(const WindowGeometry& g, int64_t bottom, int64_t right, bool include_pad,
                         const T* dy, T* dx) {
  const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  parallel_for(
      g.batch * g.channels, planes_per_chunk(plane + out_plane * g.kh * g.kw),
      [&](int64_t begin, int64_t end) {
        std::vector<double> acc(plane);
        for (int64_t p = begin; p < end; ++p) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              // The window's cells inside x, and inside the padded input.
              const int64_t y0 = oy * g.sh - g.top, x0 = ox * g.sw - g.left;
              const int64_t y_lo = std::max<int64_t>(y0, 0), y_hi = std::min(y0 + g.kh, g.h);
              const int64_t x_lo = std::max<int64_t>(x0, 0), x_hi = std::min(x0 + g.kw, g.w);
              const int64_t count = include_pad ? (std::min(y0 + g.kh, g.h + bottom) - y0) *
                                                      (std::min(x0 + g.kw, g.w + right) - x0)
                                                : (y_hi - y_lo) * (x_hi - x_lo);
              const double share = static_cast<double>(dy[p * out_plane + oy * g.ow + ox]) / count;
              for (int64_t iy = y_lo; iy < y_hi; ++iy) {
                for (int64_t ix = x_lo; ix < x_hi; ++ix) acc[iy * g.w + ix] += share;
              }
            }
          }
          std::copy(acc.begin(), acc.end(), dx + p * plane);
        }
      });
}

#define MF_WINDOW_BACKWARD(T)                                                                 \
  template void conv2d_backward_data<T>(const WindowGeometry&, int64_t, int64_t, const T*,    \
                                        const T*, T*);                                        \
  template void conv2d_backward_weights<T>(const WindowGeometry&, int64_t, int64_t, const T*, \
                                           const T*, T*);                                     \
  template void max_pool2d_backward<T>(const WindowGeometry&, const T*, const T*, T*);        \
  template void max_pool2d_select<T>(const WindowGeometry&, const T*, const T*, T*);          \
  template void avg_pool2d_backward<T>(const WindowGeometry&, int64_t, int64_t, bool, const T*, T*);
MF_WINDOW_BACKWARD(float)
MF_WINDOW_BACKWARD(double)
#undef MF_WINDOW_BACKWARD

}  // namespace mf::runtime::ops
