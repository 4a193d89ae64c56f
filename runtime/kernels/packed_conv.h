#pragma once
// A float32 convolution (one group, channels-last x and y) computed as one GEMM against weights
// packed once: y (positions x out_channels) = im2col(x) (positions x K) * W (K x out_channels),
// K = kh * kw * in_channels in (ky, kx, c) order.
//
// Why beside oneDNN: where the output plane is small (resnet18's 7x7 and 14x14 stages), each weight
// is used only for a few dozen positions, so the convolution streams its weights from memory as
// fast as it multiplies them. oneDNN 2.6's direct kernel does not overlap those reads with its
// arithmetic: resnet18's 512 -> 512 3x3 over 7x7 runs at 216 GFLOP/s with its 9.4 MB of weights
// cached but 113 GFLOP/s when, as in the network, 45 MB of other weights pass between two uses
// (docs/performance.md §6.6). Here the weights are packed into panels of 64 output channels laid
// out in the order the kernel reads them, and while one 256-deep block of a panel is multiplied,
// the next is prefetched into L2: the same convolution runs at 80-85% of the FMA peak with its
// weights coming from memory (benchmarks/dnnl_kernels_bench.cc, BM_ConvColdWeights).
//
// Each output element is one FMA chain over k = 0..K-1 from 0, then + bias, then the activation:
// the same bits for any thread count, tiling or batch position, so deterministic runs need nothing
// more. Needs an AVX-512 build; elsewhere packed_conv_applies() is false and oneDNN runs every
// convolution.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/kernels/window_geometry.h"

namespace mf::runtime::ops {

// conv2d weights (out_channels, in_channels, kh, kw) in the kernel's order: panels of kPanel
// output channels, each K x kPanel row-major (the last panel's missing channels zero).
struct PackedConvWeights {
  static constexpr int64_t kPanel = 64;
  int64_t out_channels = 0;
  int64_t depth = 0;  // K
  std::unique_ptr<float, void (*)(void*)> data{nullptr, nullptr};

  int64_t panels() const { return (out_channels + kPanel - 1) / kPanel; }
  size_t bytes() const { return static_cast<size_t>(panels() * depth * kPanel) * sizeof(float); }
};

// True in builds with the kernel (AVX-512; the library's own flags decide, not the caller's).
bool packed_conv_available();

// True when conv2d with geometry `g` (batch, channels, planes), `out_channels` and `groups` runs
// here: one group, at most kMaxPositions output positions (batch * oh * ow), and weights of at
// least kMinWeightBytes (below that they stay cached and oneDNN's kernel is as fast).
bool packed_conv_applies(const WindowGeometry& g, int64_t out_channels, int64_t groups);

// Packs OIHW `weights` of (out_channels, g.channels, g.kh, g.kw).
std::shared_ptr<const PackedConvWeights> pack_conv_weights(const float* weights,
                                                           const WindowGeometry& g,
                                                           int64_t out_channels);

// y (batch, oh, ow, out_channels) = conv(x (batch, h, w, channels)) + bias (out_channels, or null),
// then `activation`; on the intra-op threads.
void packed_conv2d_nhwc(const float* x, const PackedConvWeights& weights, const float* bias,
                        float* y, const WindowGeometry& g, const DirectActivation& activation);

}  // namespace mf::runtime::ops
