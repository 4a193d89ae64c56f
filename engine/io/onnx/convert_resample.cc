// ONNX import: padding and resampling (Pad, Resize, Upsample).
//
// Pad: to opset 10 `pads` and `value` are attributes; from 11 `pads` is input 1 (known) and the
// constant an optional input 2 (known, or read at run time as the pad op's value input); from 18
// an optional known `axes` input names the axes `pads` lists. Modes constant, edge and reflect.
//
// Resize and Upsample become the resize op, NCHW only (rank 4, height and width resized; batch and
// channels kept), modes nearest and linear. Upsample (its scales an attribute to opset 8, an
// input from 9) and Resize-10 (a scales input) sample at x_resized / scale and round nearest as
// ONNX Runtime does (floor when upsampling, ceil when downsampling). From opset 11 Resize takes
// roi, scales and sizes inputs (scales or sizes known, the other absent or empty) and its
// coordinate_transformation_mode and nearest_mode; from 18 axes and keep_aspect_ratio_policy.
// Cubic interpolation, tf_crop_and_resize and antialias are Unsupported.

#include "engine/io/onnx/importer_impl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {
namespace {

// What a Resize or Upsample asks for along `axes` of x: scales or output sizes (one of them).
struct ResampleRequest {
  std::vector<int64_t> axes;  // normalized, distinct
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::string policy = "stretch";  // keep_aspect_ratio_policy, with sizes
};

// The resize op's out_h, out_w, scale_h and scale_w for a request over x, as ONNX computes them:
// from scales floor(in * scale) and the scales themselves in the coordinate transform; from
// sizes the sizes (stretch) or one scale for every resized axis (not_larger: the smallest,
// not_smaller: the largest) and round(scale * in). `where` names the node in errors.
ir::Attrs plan_resize(const std::string& where, const Shape& in, const ResampleRequest& r) {
  const bool by_scales = !r.scales.empty();
  MF_CHECK(by_scales != !r.sizes.empty(), InvalidArgument, where,
           by_scales ? " gives both scales and sizes; ONNX allows one of them"
                     : " needs scales or sizes (one of them nonempty)");
  const size_t given = by_scales ? r.scales.size() : r.sizes.size();
  MF_CHECK(given == r.axes.size(), InvalidArgument, where, ": ", by_scales ? "scales" : "sizes",
           " has ", given, " entries for the ", r.axes.size(), " axes resized (x is ",
           ir::shape_to_string(in), ")");
  const int64_t rank = int64_t(in.size());
  std::vector<double> scales(size_t(rank), 1.0);
  Shape out = in;
  bool scale_given = true;
  if (by_scales) {
    for (size_t i = 0; i < r.axes.size(); ++i) {
      const int64_t axis = r.axes[i];
      const double s = r.scales[i];
      MF_CHECK(std::isfinite(s) && s > 0, InvalidArgument, where, ": scales must be > 0, got ", s,
               " for axis ", axis);
      const double dim = std::floor(double(in[size_t(axis)]) * s);
      MF_CHECK(dim <= double(ir::kMaxTensorElements), InvalidArgument, where, ": scale ", s,
               " makes axis ", axis, " of x ", ir::shape_to_string(in), " larger than 2^40");
      scales[size_t(axis)] = s;
      out[size_t(axis)] = int64_t(dim);
    }
  } else {
    for (size_t i = 0; i < r.axes.size(); ++i) {
      MF_CHECK(r.sizes[i] >= 0, InvalidArgument, where, ": sizes must be >= 0, got ",
               ir::shape_to_string(r.sizes));
    }
    if (r.policy == "stretch") {
      scale_given = false;
      for (size_t i = 0; i < r.axes.size(); ++i) out[size_t(r.axes[i])] = r.sizes[i];
    } else {
      MF_CHECK(r.policy == "not_larger" || r.policy == "not_smaller", InvalidArgument, where,
               ": keep_aspect_ratio_policy must be \"stretch\", \"not_larger\" or "
               "\"not_smaller\", got \"",
               echo(r.policy, 40), "\"");
      const bool smallest = r.policy == "not_larger";
      double scale = smallest ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t i = 0; i < r.axes.size(); ++i) {
        const int64_t dim = in[size_t(r.axes[i])];
        MF_CHECK(dim > 0, InvalidArgument, where, ": keep_aspect_ratio_policy \"",
                 echo(r.policy, 40), "\" needs nonempty axes, but axis ", r.axes[i], " of x ",
                 ir::shape_to_string(in), " is empty");
        const double ratio = double(r.sizes[i]) / double(dim);
        scale = smallest ? std::min(scale, ratio) : std::max(scale, ratio);
      }
      for (int64_t axis : r.axes) {
        const double dim = std::floor(scale * double(in[size_t(axis)]) + 0.5);  // round half up
        MF_CHECK(dim <= double(ir::kMaxTensorElements), InvalidArgument, where,
                 ": the sizes make axis ", axis, " larger than 2^40");
        scales[size_t(axis)] = scale;
        out[size_t(axis)] = int64_t(dim);
      }
    }
  }
  if (rank != 4) {
    MF_FAIL(Unsupported, where, ": resizing a rank-", rank, " tensor ", ir::shape_to_string(in),
            " is not supported; only NCHW (rank 4) tensors, resized along height and width");
  }
  for (int64_t axis : {0, 1}) {
    if (out[size_t(axis)] != in[size_t(axis)] || (scale_given && scales[size_t(axis)] != 1.0)) {
      MF_FAIL(Unsupported, where, ": resizing axis ", axis, axis == 0 ? " (batch)" : " (channels)",
              " of x ", ir::shape_to_string(in),
              " is not supported; only the height and width (axes 2 and 3) of NCHW");
    }
  }
  return {{"out_h", out[2]},
          {"out_w", out[3]},
          {"scale_h", scale_given ? scales[2] : 0.0},
          {"scale_w", scale_given ? scales[3] : 0.0}};
}

std::vector<int64_t> all_axes(int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  return axes;
}

// Axes as ONNX gives them (negative from the end) normalized; out of range or repeated is
// InvalidArgument.
std::vector<int64_t> normalized_axes(const std::string& where, std::vector<int64_t> axes,
                                     int64_t rank) {
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t& a : axes) {
    const int64_t given = a;
    if (a < 0 && a >= -rank) a += rank;
    MF_CHECK(a >= 0 && a < rank && !seen[size_t(a)], InvalidArgument, where, ": axis ", given,
             " is out of range or repeated for rank ", rank);
    seen[size_t(a)] = true;
  }
  return axes;
}

std::vector<double> values_of(const HostTensor& h) {
  std::vector<double> v;
  for (int64_t i = 0; i < h.size(); ++i) v.push_back(h.at(i));
  return v;
}

}  // namespace

void Importer::add_resample_converters(ConverterTable& table) {
  add_converters(table, {
                            {"Pad", &Importer::convert_pad},
                            {"Resize", &Importer::convert_resize},
                            {"Upsample", &Importer::convert_upsample},
                            {"GridSample", &Importer::convert_grid_sample},
                        });
}

// GridSample (opset 16: 2-D, modes bilinear, nearest, bicubic) is the registry's grid_sample.
void Importer::convert_grid_sample() {
  MF_CHECK(opset_ >= 16, InvalidArgument, describe(),
           ": GridSample exists from opset 16 on; the node is malformed");
  Value x = input(0), grid = input(1);
  require_float(x, "X");
  if (rank_of(x) != 4) {
    unsupported("only 2-D sampling (X of rank 4) is supported, got X " +
                ir::shape_to_string(shape_of(x)));
  }
  if (grid.type().dtype != x.type().dtype) grid = emit("cast", {grid}, {{"dtype", x.type().dtype}});
  set_output(0, emit("grid_sample", {x, grid},
                     {{"mode", attr_string("mode", "bilinear")},
                      {"padding_mode", attr_string("padding_mode", "zeros")},
                      {"align_corners", attr_int("align_corners", 0) != 0}}));
}

void Importer::convert_pad() {
  Value x = input(0);
  const int64_t rank = rank_of(x);
  const std::string mode = attr_string("mode", "constant");
  if (mode == "wrap") unsupported("mode \"wrap\" (ONNX opset 19) is not supported");
  MF_CHECK(mode == "constant" || mode == "edge" || mode == "reflect", InvalidArgument, describe(),
           ": mode must be \"constant\", \"edge\" or \"reflect\", got \"", echo(mode, 40), "\"");
  std::vector<int64_t> pads;
  double value = 0.0;
  std::optional<Value> value_input;  // the constant when it is known only at run time
  if (opset_ < 11) {
    MF_CHECK(has_attr("pads"), InvalidArgument, describe(),
             " needs the pads attribute (before opset 11 it is not an input)");
    pads = attr_ints("pads", {});
    value = attr_float("value", 0.0);
  } else {
    MF_CHECK(!has_attr("pads") && !has_attr("value"), InvalidArgument, describe(),
             ": from opset 11 pads and the constant are inputs 1 and 2, not attributes; the node "
             "is malformed");
    pads = known_ints(1, "pads");
    if (has_input(2) && mode == "constant") {
      if (const std::optional<HostTensor> v = known(2)) {
        MF_CHECK(v->size() == 1, InvalidArgument, describe(),
                 ": constant_value must hold one element, got shape ",
                 ir::shape_to_string(v->type.shape));
        MF_CHECK(v->type.dtype == x.type().dtype, InvalidArgument, describe(),
                 ": constant_value is ", ir::dtype_name(v->type.dtype), " but data is ",
                 ir::dtype_name(x.type().dtype));
        // The op takes its constant as a double: int64 values beyond 2^53 would be rounded.
        if (v->type.dtype == DType::kInt64) {
          const int64_t i = v->ints()[0];
          if (i > (int64_t{1} << 53) || i < -(int64_t{1} << 53)) {
            unsupported("a constant_value beyond 2^53 (" + std::to_string(i) +
                        ") is not supported for INT64 data");
          }
        }
        value = v->at(0);
      } else {
        value_input = input(2);
      }
    }
    if (opset_ >= 18 && has_input(3)) {
      const std::vector<int64_t> axes = normalized_axes(describe(), known_ints(3, "axes"), rank);
      MF_CHECK(pads.size() == 2 * axes.size(), InvalidArgument, describe(), ": pads ",
               ir::shape_to_string(pads), " must have 2 entries per axis in axes (",
               2 * axes.size(), ")");
      std::vector<int64_t> full(size_t(2 * rank), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        full[size_t(axes[i])] = pads[i];
        full[size_t(rank + axes[i])] = pads[axes.size() + i];
      }
      pads = std::move(full);
    }
  }
  MF_CHECK(int64_t(pads.size()) == 2 * rank, InvalidArgument, describe(), ": pads ",
           ir::shape_to_string(pads), " must have 2 entries per axis of data ",
           ir::shape_to_string(shape_of(x)), " (", 2 * rank, ")");
  if (mode == "reflect") {
    // numpy reflects again and again when a pad reaches the axis' size; the op reflects once.
    const Shape& shape = shape_of(x);
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t n = shape[size_t(d)], b = pads[size_t(d)], e = pads[size_t(rank + d)];
      if (b < -n || e < -n) continue;  // the op refuses the crop
      const int64_t kept = n - std::max<int64_t>(0, -b) - std::max<int64_t>(0, -e);
      const int64_t widest = std::max({b, e, int64_t{0}});
      if (kept >= 1 && widest >= kept) {
        unsupported("mode \"reflect\" with a pad of " + std::to_string(widest) + " on an axis of " +
                    std::to_string(kept) +
                    " elements is not supported; reflect pads must be smaller than the axis");
      }
    }
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    set_output(0, x);
    return;
  }
  ir::Attrs attrs = {{"pads", pads}, {"mode", mode}};
  if (mode == "constant" && !value_input) attrs["value"] = value;
  std::vector<Value> inputs = {x};
  if (value_input) inputs.push_back(*value_input);
  set_output(0, emit("pad", std::move(inputs), std::move(attrs)));
}

void Importer::convert_resize() {
  MF_CHECK(opset_ >= 10, InvalidArgument, describe(),
           ": Resize exists from opset 10 on; the node is malformed");
  Value x = input(0);
  require_float(x, "x");
  const std::string mode = attr_string("mode", "nearest");
  MF_CHECK(mode == "nearest" || mode == "linear" || (mode == "cubic" && opset_ >= 11),
           InvalidArgument, describe(),
           ": mode must be \"nearest\", \"linear\" or \"cubic\", got \"", echo(mode, 40), "\"");
  ResampleRequest request;
  request.axes = all_axes(rank_of(x));
  std::string transform = "asymmetric", nearest = "simple";
  if (opset_ < 11) {
    request.scales = values_of(require_known(1, "scales"));
  } else {
    transform = attr_string("coordinate_transformation_mode", "half_pixel");
    if (transform == "tf_crop_and_resize" || transform == "half_pixel_symmetric") {
      unsupported("coordinate_transformation_mode \"" + echo(transform, 40) +
                  "\" is not supported");
    }
    MF_CHECK(transform == "half_pixel" || transform == "pytorch_half_pixel" ||
                 transform == "align_corners" || transform == "asymmetric" ||
                 transform == "tf_half_pixel_for_nn",
             InvalidArgument, describe(), ": coordinate_transformation_mode \"",
             echo(transform, 40), "\" is not one of ONNX's");
    nearest = attr_string("nearest_mode", "round_prefer_floor");
    MF_CHECK(nearest == "round_prefer_floor" || nearest == "round_prefer_ceil" ||
                 nearest == "floor" || nearest == "ceil",
             InvalidArgument, describe(), ": nearest_mode \"", echo(nearest, 40),
             "\" is not one of ONNX's");
    // With linear, excluding the taps outside x and renormalizing gives the edge element, as
    // clamping does; with nearest a lone outside tap would leave no weight at all.
    if (attr_int("exclude_outside", 0) != 0 && mode == "nearest") {
      unsupported("exclude_outside with mode \"nearest\" is not supported");
    }
    if (opset_ >= 18) {
      if (attr_int("antialias", 0) != 0) unsupported("antialias is not supported");
      if (has_attr("axes")) {
        request.axes = normalized_axes(describe(), attr_ints("axes", {}), rank_of(x));
      }
      request.policy = attr_string("keep_aspect_ratio_policy", "stretch");
    }
    has_input(1);  // roi: read by tf_crop_and_resize only, refused above
    // scales and sizes: absent, empty (opset 11 and 12 pass an empty tensor for the unused one),
    // or known. An unknown one of no elements is as good as absent.
    if (has_input(2)) {
      if (const std::optional<HostTensor> s = known(2)) {
        request.scales = values_of(*s);
      } else if (ir::num_elements(shape_of(input(2))) > 0) {
        request.scales = values_of(require_known(2, "scales"));
      }
    }
    if (has_input(3)) {
      if (const std::optional<HostTensor> s = known(3)) {
        request.sizes = s->ints();
      } else if (ir::num_elements(shape_of(input(3))) > 0) {
        request.sizes = known_ints(3, "sizes");
      }
    }
  }
  ir::Attrs attrs = plan_resize(describe(), shape_of(x), request);
  attrs["mode"] = mode;
  attrs["coordinate_transformation_mode"] = transform;
  attrs["nearest_mode"] = nearest;
  if (mode == "cubic") {
    attrs["cubic_coeff_a"] = attr_float("cubic_coeff_a", -0.75);
    attrs["exclude_outside"] = attr_int("exclude_outside", 0) != 0;
  }
  set_output(0, emit("resize", {x}, std::move(attrs)));
}

void Importer::convert_upsample() {
  Value x = input(0);
  require_float(x, "x");
  const std::string mode = attr_string("mode", "nearest");
  MF_CHECK(mode == "nearest" || mode == "linear", InvalidArgument, describe(),
           ": mode must be \"nearest\" or \"linear\", got \"", echo(mode, 40), "\"");
  ResampleRequest request;
  request.axes = all_axes(rank_of(x));
  if (opset_ >= 9) {
    MF_CHECK(!has_attr("scales"), InvalidArgument, describe(),
             ": from opset 9 scales is input 1, not an attribute; the node is malformed");
    request.scales = values_of(require_known(1, "scales"));
  } else {
    const AttributeProto* a = find_attr("scales");
    MF_CHECK(a != nullptr, InvalidArgument, describe(),
             " needs the scales attribute (before opset 9 it is not an input)");
    check_attr(*a, AttributeProto::FLOATS);
    request.scales.assign(a->floats().begin(), a->floats().end());
  }
  ir::Attrs attrs = plan_resize(describe(), shape_of(x), request);
  attrs["mode"] = mode;
  attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  attrs["nearest_mode"] = std::string("simple");
  set_output(0, emit("resize", {x}, std::move(attrs)));
}

}  // namespace mf::onnx::detail
