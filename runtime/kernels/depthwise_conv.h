#pragma once
// Depthwise 2-D convolution (one filter per channel) over float32 NCHW tensors, computed directly.
//
// oneDNN 2.6 has no fast depthwise kernel for plain NCHW (it falls back to im2col + sgemm per
// channel, 14 GFLOP/s on 144 channels of 56x56); its fast one (brdgmm_dw) wants channels-last or
// blocked tensors, and reordering x in and y out around every call cost 2.4x the convolution
// itself. Op by op, where tensors are NCHW between ops, this kernel convolves each channel's plane
// in place of the three passes (benchmarks/dnnl_kernels_bench.cc, dw3x3_144_56).
//
// Each output element is an FMA chain over its taps in (ky, kx) order from 0 (a tap in the padding
// reads 0), then + bias, then the activation; the vector and scalar parts do exactly that per
// element, so any thread count, alignment or tail gives the same bits, and they are oneDNN's
// channels-last kernel's (tests/runtime/dnnl_kernels_test.cc).

#include <cstdint>

#include "runtime/kernels/window_geometry.h"

namespace mf::runtime::ops {

// Whether this CPU's oneDNN channels-last depthwise kernel is the one whose bits this kernel
// gives (brdgmm_dw): only then does conv2d run NCHW depthwise convolutions here
// (runtime/ops/conv.cc).
bool depthwise_nchw_matches_onednn();

// x (batch, channels, h, w), weight (channels, 1, kh, kw), bias (channels) or null, y (batch,
// channels, oh, ow); planes in parallel on the intra-op threads.
void depthwise_conv2d_nchw(const float* x, const float* weight, const float* bias, float* y,
                           const WindowGeometry& g, const DirectActivation& activation);

}  // namespace mf::runtime::ops
