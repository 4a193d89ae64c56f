#pragma once
// The backward kernels of the windowed ops (conv2d, max_pool2d, avg_pool2d) over NCHW tensors,
// computed directly, for the gradient ops of runtime/ops/conv.cc and pool.cc.
//
// Each task owns whole outputs (a (image, channel) plane of dx, an input channel's slice of dw) and
// adds into them in one fixed order: the bits never depend on the thread count. The convolutions
// multiply by Eigen's GEMM in the tensors' type; the pools add in double.

#include <cstdint>

#include "runtime/kernels/window_geometry.h"

namespace mf::runtime::ops {

// dx (batch, channels, h, w) of y = conv2d(x, w): dy (batch, out_channels, oh, ow), weight
// (out_channels, channels / groups, kh, kw).
template <typename T>
void conv2d_backward_data(const WindowGeometry& g, int64_t out_channels, int64_t groups,
                          const T* dy, const T* weight, T* dx);

// dw (out_channels, channels / groups, kh, kw) of the same, from x and dy.
template <typename T>
void conv2d_backward_weights(const WindowGeometry& g, int64_t out_channels, int64_t groups,
                             const T* x, const T* dy, T* dw);

// dx of y = max_pool2d(x): each window's dy goes to the element the forward's max keeps, the first
// largest inside x in row-major window order (padded cells and NaN never win; a window with no
// winner gives its dy to its first cell inside x).
template <typename T>
void max_pool2d_backward(const WindowGeometry& g, const T* x, const T* dy, T* dx);

// The adjoint of max_pool2d_backward in dy (max_pool2d_grad's own backward): for each window, the
// element of `grad` (x's shape) at the cell max_pool2d_backward gives that window's dy to.
template <typename T>
void max_pool2d_select(const WindowGeometry& g, const T* x, const T* grad, T* y);

// dx of y = avg_pool2d(x): each window's dy divided by its count over its cells inside x. The
// count takes the padding (up to `bottom` and `right` beyond the input) when `include_pad`.
template <typename T>
void avg_pool2d_backward(const WindowGeometry& g, int64_t bottom, int64_t right, bool include_pad,
                         const T* dy, T* dx);

}  // namespace mf::runtime::ops
