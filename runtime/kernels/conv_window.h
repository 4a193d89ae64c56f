// The 2-D window shared by the convolution and pooling ops (runtime/ops/conv.cc, pool.cc): the
// window read from attributes and checked once, and the NCHW <-> NHWC moves their float64 paths
// and references make (oneDNN and the direct kernels take channels-last; the loops take NCHW).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/op_def.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/window_geometry.h"

namespace mf::runtime::ops {

// The 2-D window geometry shared by conv and pools, read from attributes and checked.
struct Window {
  int64_t kh = 1, kw = 1;
  int64_t sh = 1, sw = 1;
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  int64_t dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
};

// An attribute of two values [h, w], each at least `min_value` and at most 2^40.
std::vector<int64_t> pair_attr(std::string_view op, const Attrs& attrs, std::string_view name,
                               int64_t min_value);

// The 'padding' attribute, [pad_h, pad_w] or [top, bottom, left, right], as [top, bottom, left,
// right]; each in [0, 2^40].
std::array<int64_t, 4> padding_attr(std::string_view op, const Attrs& attrs);

// The window of a kh x kw kernel over x (NCHW sizes): stride, padding (and dilation when
// `has_dilation`) from the attributes, output sizes rounded down; every product is checked.
Window make_window(std::string_view op, const Shape& x, int64_t kh, int64_t kw, const Attrs& attrs,
                   bool has_dilation);

// The window over the planes of `x` (NCHW sizes), for the direct kernels.
WindowGeometry window_geometry(const Shape& x, const Window& w);

// x is a float tensor of rank 4 (NCHW or NHWC).
void check_nchw(std::string_view op, const TensorType& x);

// True for data_format "NHWC", false for "NCHW"; anything else is InvalidArgument.
bool channels_last(std::string_view op, const Attrs& attrs);

// The (N, C, H, W) sizes of an activation given in `channels_last` order, and back.
Shape nchw_sizes(const Shape& s, bool channels_last);
Shape in_format(const Shape& nchw, bool channels_last);

// Copies NHWC `from` into NCHW `to` (to_nchw) or back, for sizes `nchw`.
template <typename T>
void transpose_activation(const T* from, T* to, const Shape& nchw, bool to_nchw) {
  const int64_t n = nchw[0], c = nchw[1], hw = nchw[2] * nchw[3];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t nhwc = (b * hw + p) * c + k, nchw_index = (b * c + k) * hw + p;
        if (to_nchw) {
          to[nchw_index] = from[nhwc];
        } else {
          to[nhwc] = from[nchw_index];
        }
      }
}

// Runs an NCHW float64 kernel on an NHWC node: x transposed in, y transposed out. oneDNN has no
// float64 kernels and the Eigen and loop paths read NCHW; float64 is for references and tests.
void run_nhwc_as_nchw(const ir::KernelContext& ctx, void (*nchw_kernel)(const ir::KernelContext&));

// The reference's view of the same: an NHWC RefTensor as NCHW values, and back.
RefTensor ref_to_nchw(const RefTensor& t);
RefTensor ref_to_nhwc(const RefTensor& t);

// A convolution's window attributes (stride, padding, dilation, groups), for samples.
ir::Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding,
                     std::vector<int64_t> dilation, int64_t groups);

// The window attributes of a convolution's `attrs` (stride, padding, dilation, groups), without
// its format, activation or sizes: what its gradient ops share with it.
ir::Attrs conv_window_attrs(const ir::Attrs& attrs);

// `attrs` with data_format "NHWC", for samples.
ir::Attrs channels_last_attrs(ir::Attrs attrs);

}  // namespace mf::runtime::ops
