#pragma once
// Max pooling over float32 channels-last (NHWC) tensors, computed directly: for each output pixel,
// the elementwise max of its window's input pixels, sixteen channels per vector. oneDNN 2.6's
// channels-last max pool took 0.525 ms on squeezenet's first (96 channels, 109x109 to 54x54, 3x3
// stride 2: 4.5 MB read, 8.7 GB/s); this pass reads at the cache's speed.
//
// Per channel the result is std::max(acc, v) over the window's taps inside the input, in (ky, kx)
// order, from -infinity (a padded cell never wins), as the float64 kernel and the reference do.

#include <cstdint>

#include "runtime/kernels/window_geometry.h"

namespace mf::runtime::ops {

// x (batch, h, w, channels), y (batch, oh, ow, channels) (g's dilation is 1); output rows in
// parallel on the intra-op threads.
void max_pool2d_nhwc_f32(const float* x, float* y, const WindowGeometry& g);

}  // namespace mf::runtime::ops
