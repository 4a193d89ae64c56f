// grid_sample(x, grid) {mode, padding_mode, align_corners}: samples NCHW x at the points of grid
// (N, H_out, W_out, 2), each (x, y) in [-1, 1] across the input's width and height (ONNX's
// GridSample, PyTorch's grid_sample). The output is (N, C, H_out, W_out).
//   unnormalized: align_corners ? (g + 1) / 2 * (size - 1) : ((g + 1) * size - 1) / 2
//   padding_mode "zeros": a tap outside x reads 0; "border": the coordinate is clamped into
//   [0, size - 1]; "reflection": reflected about the edges (the pixel centres at 0 and size - 1
//   with align_corners, the borders at -0.5 and size - 0.5 without), then clamped.
//   mode "bilinear": the four taps around the point; "nearest": the nearest, halves to even;
//   "bicubic": the 4 x 4 taps around it with Keys' kernel (A = -0.75), the padding applied to each
//   tap (as PyTorch does).
// A grid value that is not finite samples nothing: 0. Float32 and Float64.

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

enum class SampleMode { kBilinear, kNearest, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

struct GridSpec {
  SampleMode mode = SampleMode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

GridSpec grid_spec(const Attrs& attrs) {
  GridSpec spec;
  const std::string& mode = ir::attr_string(attrs, "mode", "grid_sample");
  const std::string& padding = ir::attr_string(attrs, "padding_mode", "grid_sample");
  if (mode == "bilinear") {
    spec.mode = SampleMode::kBilinear;
  } else if (mode == "nearest") {
    spec.mode = SampleMode::kNearest;
  } else {
    MF_CHECK(mode == "bicubic", InvalidArgument,
             "grid_sample: mode must be \"bilinear\", \"nearest\" or \"bicubic\", got \"",
             echo(mode, 40), "\"");
    spec.mode = SampleMode::kBicubic;
  }
  if (padding == "zeros") {
    spec.padding = Padding::kZeros;
  } else if (padding == "border") {
    spec.padding = Padding::kBorder;
  } else {
    MF_CHECK(padding == "reflection", InvalidArgument,
             "grid_sample: padding_mode must be \"zeros\", \"border\" or \"reflection\", got \"",
             echo(padding, 40), "\"");
    spec.padding = Padding::kReflection;
  }
  spec.align_corners = ir::attr_bool(attrs, "align_corners", "grid_sample");
  return spec;
}

std::vector<TensorType> infer_grid_sample(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("grid_sample", in[0].dtype, kFloatTypes);
  grid_spec(attrs);
  const Shape& x = in[0].shape;
  const Shape& g = in[1].shape;
  MF_CHECK(
      x.size() == 4 && g.size() == 4 && g[3] == 2 && g[0] == x[0] && in[1].dtype == in[0].dtype,
      InvalidArgument, "grid_sample: x must be (N, C, H, W) and grid (N, H_out, W_out, 2) of ",
      "x's dtype, got ", ir::type_to_string(in[0]), " and ", ir::type_to_string(in[1]));
  MF_CHECK((x[2] > 0 && x[3] > 0) || ir::num_elements(g) == 0, InvalidArgument, "grid_sample: x ",
           ir::shape_to_string(x), " has an empty plane to sample from");
  return {{in[0].dtype, {x[0], x[1], g[1], g[2]}}};
}

// The coordinate after border or reflection padding (zeros leaves it).
double padded_coordinate(double v, int64_t size, const GridSpec& spec) {
  if (spec.padding == Padding::kZeros) return v;
  if (spec.padding == Padding::kReflection) {
    const double low = spec.align_corners ? 0.0 : -0.5;
    const double span = spec.align_corners ? double(size - 1) : double(size);
    if (span <= 0) {
      v = 0;
    } else {
      const double d = std::fabs(v - low);
      const double flips = std::floor(d / span);
      const double extra = std::fmod(d, span);
      v = std::fmod(flips, 2.0) == 0 ? low + extra : low + span - extra;
    }
  }
  return std::clamp(v, 0.0, double(size - 1));
}

double cubic_weight(double d) {  // Keys' kernel at distance |d|, A = -0.75
  constexpr double a = -0.75;
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// The taps of one point along one axis: index (-1: reads 0) and weight.
struct Taps {
  int count = 0;
  std::array<int64_t, 4> index{};
  std::array<double, 4> weight{};
};

Taps axis_taps(double g, int64_t size, const GridSpec& spec) {
  Taps taps;
  if (!std::isfinite(g)) return taps;
  double v = spec.align_corners ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
  // With zeros padding, far outside every tap reads 0: bounded so that floor() fits an int64.
  // (Border and reflection bring the coordinate, or each tap, into the axis before it is cast.)
  if (spec.padding == Padding::kZeros) v = std::clamp(v, -double(size) - 8, 2.0 * double(size) + 8);
  const auto inside = [size](int64_t i) { return i >= 0 && i < size ? i : int64_t{-1}; };
  if (spec.mode == SampleMode::kBicubic) {
    const double f = std::floor(v);
    for (int k = 0; k < 4; ++k) {
      const double at = f - 1 + k;
      taps.index[size_t(k)] = inside(int64_t(padded_coordinate(at, size, spec)));
      taps.weight[size_t(k)] = cubic_weight(v - at);
    }
    taps.count = 4;
    return taps;
  }
  v = padded_coordinate(v, size, spec);
  if (spec.mode == SampleMode::kNearest) {
    taps.count = 1;
    taps.index[0] = inside(int64_t(std::nearbyint(v)));
    taps.weight[0] = 1;
    return taps;
  }
  const double f = std::floor(v);
  taps.count = 2;
  taps.index = {inside(int64_t(f)), inside(int64_t(f) + 1), 0, 0};
  taps.weight = {1 - (v - f), v - f, 0, 0};
  return taps;
}

template <typename T>
void grid_sample_typed(const ir::KernelContext& ctx) {
  const GridSpec spec = grid_spec(ctx.attrs);
  const Shape& xs = ctx.inputs[0].type.shape;
  const Shape& gs = ctx.inputs[1].type.shape;
  const int64_t channels = xs[1], height = xs[2], width = xs[3], out_h = gs[1], out_w = gs[2];
  const T* x = ctx.inputs[0].as<T>();
  const T* grid = ctx.inputs[1].as<T>();
  T* y = ctx.outputs[0].as<T>();
  parallel_for(xs[0] * out_h, grain_for(out_w * channels * 16), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / out_h, oy = row % out_h;
      for (int64_t ox = 0; ox < out_w; ++ox) {
        const T* g = grid + ((n * out_h + oy) * out_w + ox) * 2;
        const Taps tx = axis_taps(double(g[0]), width, spec);
        const Taps ty = axis_taps(double(g[1]), height, spec);
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = x + (n * channels + c) * height * width;
          T sum = 0;
          for (int i = 0; i < ty.count; ++i) {
            if (ty.index[size_t(i)] < 0) continue;
            T along = 0;
            for (int j = 0; j < tx.count; ++j) {
              if (tx.index[size_t(j)] < 0) continue;
              along += T(tx.weight[size_t(j)]) *
                       plane[ty.index[size_t(i)] * width + tx.index[size_t(j)]];
            }
            sum += T(ty.weight[size_t(i)]) * along;
          }
          y[((n * channels + c) * out_h + oy) * out_w + ox] = sum;
        }
      }
    }
  });
}

void grid_sample_kernel(const ir::KernelContext& ctx) {
  visit_float(ctx.outputs[0].type.dtype, [&](auto tag) { grid_sample_typed<decltype(tag)>(ctx); });
}

// PyTorch's formulas written out per output element: unnormalize, pad the coordinate (or, for
// bicubic, each tap), read taps with 0 outside.
std::vector<RefTensor> grid_sample_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const std::string& mode = std::get<std::string>(attrs.at("mode"));
  const std::string& padding = std::get<std::string>(attrs.at("padding_mode"));
  const bool corners = std::get<bool>(attrs.at("align_corners"));
  const Shape& xs = in[0].shape;
  const Shape& gs = in[1].shape;
  const int64_t h = xs[2], w = xs[3];
  const auto pad = [&](double v, int64_t size) {
    if (padding == "zeros") return v;
    if (padding == "reflection") {
      const double lo2 = corners ? 0.0 : -1.0,
                   hi2 = corners ? 2.0 * double(size - 1) : 2.0 * double(size) - 1;
      if (lo2 == hi2) return 0.0;
      const double lo = lo2 / 2, span = (hi2 - lo2) / 2;
      const double d = std::fabs(v - lo);
      const int64_t flips = int64_t(std::floor(d / span));
      const double extra = std::fmod(d, span);
      v = flips % 2 == 0 ? extra + lo : span - extra + lo;
    }
    return std::min(double(size - 1), std::max(v, 0.0));
  };
  const auto read = [&](int64_t n, int64_t c, double fy, double fx) {
    const int64_t iy = int64_t(fy), ix = int64_t(fx);
    if (fy != std::floor(fy) || fx != std::floor(fx) || iy < 0 || iy >= h || ix < 0 || ix >= w)
      return 0.0;
    return in[0].values[size_t(((n * xs[1] + c) * h + iy) * w + ix)];
  };
  RefTensor out = ref_tensor({xs[0], xs[1], gs[1], gs[2]});
  size_t e = 0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t oy = 0; oy < gs[1]; ++oy)
        for (int64_t ox = 0; ox < gs[2]; ++ox, ++e) {
          const size_t at = size_t(((n * gs[1] + oy) * gs[2] + ox) * 2);
          const double gx = in[1].values[at], gy = in[1].values[at + 1];
          double fx = corners ? (gx + 1) / 2 * double(w - 1) : ((gx + 1) * double(w) - 1) / 2;
          double fy = corners ? (gy + 1) / 2 * double(h - 1) : ((gy + 1) * double(h) - 1) / 2;
          double value = 0;
          if (mode == "bicubic") {
            const double x0 = std::floor(fx) - 1, y0 = std::floor(fy) - 1;
            for (int i = 0; i < 4; ++i)
              for (int j = 0; j < 4; ++j) {
                const double wy = cubic_weight(fy - (y0 + i)), wx = cubic_weight(fx - (x0 + j));
                value +=
                    wy * wx * read(n, c, std::floor(pad(y0 + i, h)), std::floor(pad(x0 + j, w)));
              }
          } else {
            fx = pad(fx, w);
            fy = pad(fy, h);
            if (mode == "nearest") {
              value = read(n, c, std::nearbyint(fy), std::nearbyint(fx));
            } else {
              const double x0 = std::floor(fx), y0 = std::floor(fy);
              const double ax = fx - x0, ay = fy - y0;
              value = (1 - ay) * ((1 - ax) * read(n, c, y0, x0) + ax * read(n, c, y0, x0 + 1)) +
                      ay * ((1 - ax) * read(n, c, y0 + 1, x0) + ax * read(n, c, y0 + 1, x0 + 1));
            }
          }
          out.values[e] = value;
        }
  return {out};
}

ir::Attrs grid_attrs(std::string mode, std::string padding, bool align_corners) {
  return {{"mode", std::move(mode)},
          {"padding_mode", std::move(padding)},
          {"align_corners", align_corners}};
}

const ir::OpRegistration kGridSample =
    ir::define_op("grid_sample")
        .arity(2)
        .attr("mode", ir::AttrKind::kString, std::string("bilinear"),
              "\"bilinear\", \"nearest\" or \"bicubic\"")
        .attr("padding_mode", ir::AttrKind::kString, std::string("zeros"),
              "\"zeros\", \"border\" or \"reflection\"")
        .attr("align_corners", ir::AttrKind::kBool, false,
              "-1 and 1 are the corner pixels' centres (true) or the image's edges (false)")
        .traits(Trait::kPure)
        .infer(infer_grid_sample)
        .kernel(grid_sample_kernel)
        .reference(grid_sample_reference)
        // The grid reaches past [-1, 1] so that every padding mode is exercised.
        .samples({
            sample({f32({1, 2, 4, 5}), f32({1, 3, 6, 2})}, grid_attrs("bilinear", "zeros", false),
                   -1.4, 1.4),
            sample({f32({2, 1, 5, 3}), f32({2, 4, 2, 2})}, grid_attrs("bilinear", "border", true),
                   -1.4, 1.4),
            sample({f32({1, 3, 4, 4}), f32({1, 5, 5, 2})},
                   grid_attrs("bilinear", "reflection", false), -2.5, 2.5),
            sample({f32({1, 2, 6, 5}), f32({1, 3, 4, 2})}, grid_attrs("nearest", "zeros", true),
                   -1.3, 1.3),
            sample({f32({1, 1, 5, 5}), f32({1, 4, 4, 2})},
                   grid_attrs("nearest", "reflection", true), -2.5, 2.5),
            sample({f32({1, 2, 5, 6}), f32({1, 3, 3, 2})}, grid_attrs("bicubic", "zeros", false),
                   -1.3, 1.3),
            sample({f32({2, 1, 4, 4}), f32({2, 3, 2, 2})}, grid_attrs("bicubic", "border", true),
                   -1.5, 1.5),
            sample({f32({1, 1, 6, 4}), f32({1, 2, 5, 2})},
                   grid_attrs("bicubic", "reflection", false), -2.5, 2.5),
            // Far outside: several reflections (and a clamp a shortcut must not take).
            sample({f32({1, 1, 3, 2}), f32({1, 4, 4, 2})},
                   grid_attrs("bilinear", "reflection", false), -12, 12),
        })
        .tolerance(1e-5)
        .doc("samples NCHW x at grid's (x, y) points in [-1, 1] (ONNX's GridSample)");

}  // namespace
}  // namespace mf::runtime::ops
