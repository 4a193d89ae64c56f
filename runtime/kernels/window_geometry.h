#pragma once
// A 2-D window slid over the planes of a batch: what the direct kernels beside oneDNN's take (the
// NCHW depthwise convolution, the packed-weights convolution, the channels-last max pool). Filled
// from conv.cc's checked window, so every value is below 2^40.

#include <cstdint>

namespace mf::runtime::ops {

struct WindowGeometry {
  int64_t batch = 0, channels = 0;
  int64_t h = 0, w = 0, oh = 0, ow = 0;  // input and output planes
  int64_t kh = 1, kw = 1;
  int64_t sh = 1, sw = 1;
  int64_t top = 0, left = 0;  // padding before the first row / column
  int64_t dh = 1, dw = 1;
};

// What follows the bias inside a direct convolution kernel: y = max(v, 0) (relu) or
// min(max(v, lo), hi) (clip), as the separate ops compute them.
struct DirectActivation {
  enum class Kind { kNone, kRelu, kClip };
  Kind kind = Kind::kNone;
  float lo = 0, hi = 0;
};

}  // namespace mf::runtime::ops
