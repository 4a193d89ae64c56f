#include "runtime/kernels/packed_conv.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "base/error.h"
#include "runtime/kernels/transpose_tiles.h"
#include "runtime/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mf::runtime::ops {
namespace {

constexpr int64_t kPanel = PackedConvWeights::kPanel;
// Depth of one block of k: a run of at most this many channels of one tap (k = tap * channels + c,
// the packed weights' order), read in place from x. A panel's block (up to 256 x 64 floats, 64
// KiB) is what the next block's prefetch brings into L2 while this one is multiplied.
constexpr int64_t kDepthBlock = 256;
// Rows of a register tile: 6 rows x 64 columns are 24 accumulators, 4 weight vectors and a
// broadcast of 32 registers (7 rows measured no faster; 8 rows x 32 columns slower).
constexpr int kMaxTileRows = 6;
// Where it beats oneDNN's kernel at one and two threads with the weights coming from memory
// (BM_ConvColdWeights): up to 64 output positions (a 7x7 plane), or 256 for a 1x1 window (3x3
// windows over 14x14 ran 2-7% slower than oneDNN's); weights of at least 128 KiB (below that they
// stay cached and oneDNN's kernel is not starved); and a last panel more than half full (960 -> 160
// channels computed 192 and ran 10-15% slower).
constexpr int64_t kMaxPositions = 64;
constexpr int64_t kMaxPositions1x1 = 256;
constexpr int64_t kMinWeightBytes = int64_t{128} << 10;

}  // namespace

bool packed_conv_available() {
#if defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

bool packed_conv_applies(const WindowGeometry& g, int64_t out_channels, int64_t groups) {
#if defined(__AVX512F__)
  if (groups != 1 || out_channels <= 0 || g.batch <= 0 || g.oh <= 0 || g.ow <= 0) return false;
  // Every factor is below 2^40 (a checked window) but products of three may not be: bounded first.
  const bool one_by_one = g.kh == 1 && g.kw == 1;
  const int64_t max_positions = one_by_one ? kMaxPositions1x1 : kMaxPositions;
  if (g.batch > max_positions || g.oh > max_positions || g.ow > max_positions) return false;
  if (g.batch * g.oh * g.ow > max_positions) return false;
  const int64_t last_panel = out_channels % PackedConvWeights::kPanel;
  if (last_panel != 0 && last_panel <= PackedConvWeights::kPanel / 2) return false;
  const double weight_bytes = static_cast<double>(out_channels) * static_cast<double>(g.channels) *
                              static_cast<double>(g.kh) * static_cast<double>(g.kw) * sizeof(float);
  return weight_bytes >= static_cast<double>(kMinWeightBytes);
#else
  (void)g, (void)out_channels, (void)groups;
  return false;
#endif
}

std::shared_ptr<const PackedConvWeights> pack_conv_weights(const float* weights,
                                                           const WindowGeometry& g,
                                                           int64_t out_channels) {
  auto packed = std::make_shared<PackedConvWeights>();
  packed->out_channels = out_channels;
  packed->depth = g.kh * g.kw * g.channels;
  const size_t bytes = packed->bytes();
  // aligned_alloc needs a multiple of the alignment: panels of 64 floats are 256 bytes a row.
  // (Transparent huge pages here made the first run 2.5x slower on this VM, 145 against 59 ms for
  // resnet18, for no clear gain after it.)
  packed->data = {static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))),
                  std::free};
  MF_CHECK(packed->data != nullptr, OutOfMemory, "conv2d: cannot allocate ", bytes,
           " bytes for packed weights");
  float* out = packed->data.get();
  const int64_t depth = packed->depth, taps = g.kh * g.kw;
  // A full panel is the OIHW weights of its 64 output channels, (64, channels, taps), permuted to
  // (taps, channels, 64): two tiled transposes (transpose_tiles.h), each output channel's
  // (channels, taps) to (taps, channels) into a per-thread buffer, then the (64, depth) result to
  // (depth, 64). resnet18's largest, 9.4 MB: 3.95 against 5.1-5.8 ms for the earlier row-by-row
  // gather (BM_PackConvWeights, page faults included). The last panel, when partial, is gathered
  // row by row with its missing channels zero.
  parallel_for(packed->panels(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      float* panel = out + p * depth * kPanel;
      const int64_t columns = std::min(kPanel, out_channels - p * kPanel);
      const float* first = weights + p * kPanel * g.channels * taps;
      if (columns == kPanel) {
        const float* by_tap = first;  // (64, depth) in (tap, channel) order
        if (taps > 1) {
          thread_local std::vector<float> scratch;
          scratch.resize(static_cast<size_t>(kPanel * depth));
          for (int64_t j = 0; j < kPanel; ++j) {
            transpose_rows(first + j * depth, taps, 0, taps, g.channels, sizeof(float),
                           scratch.data() + j * depth);
          }
          by_tap = scratch.data();
        }
        transpose_rows(by_tap, depth, 0, depth, kPanel, sizeof(float), panel);
        continue;
      }
      for (int64_t tap = 0; tap < taps; ++tap) {
        for (int64_t c = 0; c < g.channels; ++c) {
          float* row = panel + (tap * g.channels + c) * kPanel;
          const float* src = first + c * taps + tap;
          for (int64_t j = 0; j < columns; ++j) row[j] = src[j * g.channels * taps];
          std::fill(row + columns, row + kPanel, 0.0f);
        }
      }
    }
  });
  return packed;
}

#if defined(__AVX512F__)
namespace {

// What a tile does after its last block of k.
struct Epilogue {
  const float* bias = nullptr;  // this panel's 64 (masked), or null
  DirectActivation activation;
};

// Rows [0, Rows) x the panel's 64 columns of y (row stride ldy, columns masked to the channels
// that exist), for one block of k: row r's kc values of x at a[r] (its pixel's channels for one
// tap, read in place: no im2col copy), the panel's block at b (kc x 64). Accumulated onto y unless
// `first`; the epilogue applied when `last`. While it runs it prefetches `prefetch_lines` cache
// lines from `prefetch` into L2: its share of the next block of weights.
template <int Rows>
void tile(const float* const* a, const float* b, int64_t kc, float* y, int64_t ldy,
          const __mmask16 (&mask)[4], bool first, bool last, const Epilogue& epilogue,
          const char* prefetch, int64_t prefetch_lines) {
  const float* row[Rows];
  for (int r = 0; r < Rows; ++r) row[r] = a[r];
  __m512 acc[Rows][4];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < 4; ++v)
      acc[r][v] =
          first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[v], y + r * ldy + 16 * v);
  int64_t due = 0, line = 0;  // prefetch progress
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kPanel;
    const __m512 b0 = _mm512_load_ps(bk), b1 = _mm512_load_ps(bk + 16);
    const __m512 b2 = _mm512_load_ps(bk + 32), b3 = _mm512_load_ps(bk + 48);
    // The tile's share of lines spread evenly over its loop (a Bresenham step), not front-loaded.
    for (due += prefetch_lines; due >= kc; due -= kc) {
      _mm_prefetch(prefetch + line * 64, _MM_HINT_T1);
      ++line;
    }
    for (int r = 0; r < Rows; ++r) {
      const __m512 av = _mm512_set1_ps(row[r][k]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(av, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(av, b3, acc[r][3]);
    }
  }
  if (last) {
    const DirectActivation& act = epilogue.activation;
    const __m512 lo = _mm512_set1_ps(act.lo), hi = _mm512_set1_ps(act.hi);
    for (int v = 0; v < 4; ++v) {
      const __m512 bias = epilogue.bias != nullptr
                              ? _mm512_maskz_loadu_ps(mask[v], epilogue.bias + 16 * v)
                              : _mm512_setzero_ps();
      for (int r = 0; r < Rows; ++r) {
        __m512 t = epilogue.bias != nullptr ? _mm512_add_ps(acc[r][v], bias) : acc[r][v];
        // max then min, as the separate relu / clip ops (a NaN passes through the same way).
        if (act.kind == DirectActivation::Kind::kRelu) {
          t = _mm512_max_ps(t, _mm512_setzero_ps());
        } else if (act.kind == DirectActivation::Kind::kClip) {
          t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
        }
        acc[r][v] = t;
      }
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(y + r * ldy + 16 * v, mask[v], acc[r][v]);
}

using TileFn = void (*)(const float* const*, const float*, int64_t, float*, int64_t,
                        const __mmask16 (&)[4], bool, bool, const Epilogue&, const char*, int64_t);
constexpr TileFn kTiles[kMaxTileRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>,
                                             tile<4>, tile<5>, tile<6>};

// Where row m's values for (tap, channel) are: its pixel's channels in x, or zeros in the padding.
const float* row_source(const float* x, const WindowGeometry& g, int64_t m, int64_t tap,
                        int64_t channel, const float* zeros) {
  const int64_t plane = g.oh * g.ow;
  const int64_t n = m / plane, oy = (m % plane) / g.ow, ox = m % g.ow;
  const int64_t iy = oy * g.sh - g.top + (tap / g.kw) * g.dh;
  const int64_t ix = ox * g.sw - g.left + (tap % g.kw) * g.dw;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return zeros;
  return x + ((n * g.h + iy) * g.w + ix) * g.channels + channel;
}

// Panels [panel_begin, panel_end) x rows [row_begin, row_end) of y: block of k by block of k, each
// block through every panel, so the block's rows of x stay in cache while the weights stream past
// them. The rows go in tiles of at most kMaxTileRows, of near-equal size.
void run_part(const float* x, const WindowGeometry& g, const PackedConvWeights& w,
              int64_t panel_begin, int64_t panel_end, int64_t row_begin, int64_t row_end, float* y,
              const float* bias, const DirectActivation& activation) {
  static const std::vector<float> zeros(kDepthBlock, 0.0f);
  const int64_t depth = w.depth;
  // A run is a stretch of k that is contiguous in x: one tap's channels, or, where no tap of a
  // window row falls in the horizontal padding, the whole row of taps (kw pixels side by side).
  // Few channels make short runs, and each block of k loads and stores y's tile: a ViT's patch
  // embedding (3 channels, 32x32 taps) ran blocks of 3 at 13 GFLOP/s.
  const bool whole_rows =
      g.dw == 1 && g.left == 0 && (g.ow - 1) * g.sw + (g.kw - 1) < g.w && g.kw > 1;
  const int64_t run = whole_rows ? g.kw * g.channels : g.channels;
  const int64_t runs = whole_rows ? g.kh : g.kh * g.kw;
  const int64_t blocks_per_run = (run + kDepthBlock - 1) / kDepthBlock;
  const int64_t blocks = runs * blocks_per_run;
  const int64_t count = row_end - row_begin;
  const int64_t tiles = (count + kMaxTileRows - 1) / kMaxTileRows;
  const int64_t base = count / tiles, extra = count % tiles;
  const float* weights = w.data.get();
  // Block `block`'s first k and size.
  // Block `block`'s first k and size (k is (tap, channel) in order, so a run's k are consecutive).
  auto block_at = [&](int64_t block, int64_t* k0) {
    const int64_t offset = (block % blocks_per_run) * kDepthBlock;
    *k0 = (block / blocks_per_run) * run + offset;
    return std::min(kDepthBlock, run - offset);
  };
  std::vector<const float*> sources(static_cast<size_t>(count));
  for (int64_t block = 0; block < blocks; ++block) {
    int64_t k0 = 0;
    const int64_t kc = block_at(block, &k0);
    // The run's first tap; an offset past its channels reads the next pixels of the row.
    const int64_t first_tap = (block / blocks_per_run) * (whole_rows ? g.kw : 1);
    const int64_t offset = (block % blocks_per_run) * kDepthBlock;
    for (int64_t i = 0; i < count; ++i) {
      sources[i] = row_source(x, g, row_begin + i, first_tap, offset, zeros.data());
    }
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const float* panel = weights + p * depth * kPanel;
      const int64_t columns = std::min(kPanel, w.out_channels - p * kPanel);
      __mmask16 mask[4];
      for (int v = 0; v < 4; ++v) {
        const int64_t bits = std::clamp<int64_t>(columns - 16 * v, 0, 16);
        mask[v] = static_cast<__mmask16>((1u << bits) - 1u);
      }
      Epilogue epilogue;
      epilogue.bias = bias != nullptr ? bias + p * kPanel : nullptr;
      epilogue.activation = activation;
      // What this part reads next: the next panel's block, or the next block's first panel;
      // spread over this block's tiles.
      const float* next = nullptr;
      int64_t next_kc = 0;
      if (p + 1 < panel_end) {
        next = weights + (p + 1) * depth * kPanel + k0 * kPanel;
        next_kc = kc;
      } else if (block + 1 < blocks) {
        int64_t next_k0 = 0;
        next_kc = block_at(block + 1, &next_k0);
        next = weights + panel_begin * depth * kPanel + next_k0 * kPanel;
      }
      const int64_t lines = next_kc * kPanel * static_cast<int64_t>(sizeof(float)) / 64;
      const int64_t per_tile = (lines + tiles - 1) / tiles;
      const float* b_block = panel + k0 * kPanel;
      int64_t i = 0;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t tile_rows = base + (t < extra ? 1 : 0);
        const int64_t first_line = std::min(lines, t * per_tile);
        kTiles[tile_rows](sources.data() + i, b_block, kc,
                          y + (row_begin + i) * w.out_channels + p * kPanel, w.out_channels, mask,
                          block == 0, block + 1 == blocks, epilogue,
                          reinterpret_cast<const char*>(next) + first_line * 64,
                          std::min(lines - first_line, per_tile));
        i += tile_rows;
      }
    }
  }
}

}  // namespace

void packed_conv2d_nhwc(const float* x, const PackedConvWeights& w, const float* bias, float* y,
                        const WindowGeometry& g, const DirectActivation& activation) {
  MF_CHECK(w.depth == g.kh * g.kw * g.channels, Internal,
           "packed conv2d: weights packed for depth ", w.depth, ", the window needs ",
           g.kh * g.kw * g.channels);
  const int64_t rows = g.batch * g.oh * g.ow;  // at most kMaxPositions (packed_conv_applies)
  // One part per thread: the panels split between them where there are enough (each core streams
  // its share of the weights), else the rows. Splitting the rows (both cores streaming every
  // weight) measured faster while an im2col copy was made per thread (710 against 762 us on the 512
  // -> 512 at two threads), slower since x is read in place (695-707 against 659-681). Each
  // element's arithmetic is the same whichever part computes it.
  const int64_t threads = intra_op_threads(), panels = w.panels();
  const bool by_panels = panels >= threads;
  const int64_t parts =
      by_panels ? threads : std::min<int64_t>(threads, (rows + kMaxTileRows - 1) / kMaxTileRows);
  parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      if (by_panels) {
        run_part(x, g, w, panels * part / parts, panels * (part + 1) / parts, 0, rows, y, bias,
                 activation);
      } else {
        run_part(x, g, w, 0, panels, rows * part / parts, rows * (part + 1) / parts, y, bias,
                 activation);
      }
    }
  });
}

#else

void packed_conv2d_nhwc(const float*, const PackedConvWeights&, const float*, float*,
                        const WindowGeometry&, const DirectActivation&) {
  MF_FAIL(Internal, "packed conv2d: needs an AVX-512 build (packed_conv_applies is false here)");
}

#endif

}  // namespace mf::runtime::ops
