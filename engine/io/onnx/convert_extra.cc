// ONNX import: ops composed from registry ops that belong to no other family: EyeLike, OneHot and
// MeanVarianceNormalization. Each is a few registry ops; with known operands they fold at import.
// The windows (HannWindow, HammingWindow, BlackmanWindow) depend on their size alone, which must
// be known: they are constants.

#include "engine/io/onnx/importer_impl.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {
namespace {

// The range op's attributes: start, start + 1, ... up to limit (excluded), as int64.
ir::Attrs int_range(int64_t start, int64_t limit) {
  return {
      {"start", double(start)}, {"limit", double(limit)}, {"delta", 1.0}, {"dtype", DType::kInt64}};
}

}  // namespace

void Importer::add_extra_converters(ConverterTable& table) {
  add_converters(table, {
                            {"EyeLike", &Importer::convert_eye_like},
                            {"MeanVarianceNormalization", &Importer::convert_mvn},
                            {"OneHot", &Importer::convert_one_hot},
                            {"HannWindow", &Importer::convert_window},
                            {"HammingWindow", &Importer::convert_window},
                            {"BlackmanWindow", &Importer::convert_window},
                        });
}

// Ones on diagonal k of x's (static, 2-D) shape, zeros elsewhere, of the dtype attribute's type or
// x's; x's values are never read. Built as equal(i + k, j) over two ranges, so it folds to a
// constant at import (a huge one stays a node rather than a constant of that size).
void Importer::convert_eye_like() {
  MF_CHECK(opset_ >= 9, InvalidArgument, describe(),
           ": EyeLike exists from opset 9 on; the node is malformed");
  const std::optional<HostTensor> known_x = known(0);
  const TensorType x = known_x ? known_x->type : input(0).type();
  MF_CHECK(x.shape.size() == 2, InvalidArgument, describe(), ": the input must be 2-D, got shape ",
           ir::shape_to_string(x.shape));
  DType dtype = x.dtype;
  if (has_attr("dtype")) {
    const int32_t code = int32_t(attr_int("dtype", 0));
    const std::optional<DType> d = to_dtype(code);
    if (!d) unsupported("dtype " + onnx_type_name(code) + "; " + kSupportedTypes);
    dtype = *d;
  }
  const int64_t rows = x.shape[0], cols = x.shape[1];
  // Beyond the matrix every diagonal is empty: k clamped to [-rows, cols] gives the same zeros,
  // and rows + k cannot overflow.
  const int64_t k = std::clamp<int64_t>(attr_int("k", 0), -rows, cols);
  const Value i = reshape(emit("range", {}, int_range(k, rows + k)), {rows, 1});
  const Value j = emit("range", {}, int_range(0, cols));
  Value y = emit("equal", {i, j});
  if (dtype != DType::kBool) y = emit("cast", {y}, {{"dtype", dtype}});
  set_output(0, y);
}

// OneHot(indices, depth, values): values[1] (on) where an index equals its position along the new
// axis, values[0] (off) elsewhere; built as equal(expand_dims(indices, axis), 0..depth-1 along
// axis) and a select. Indices of a non-integer type are cast to int64 first (truncated, as ONNX
// says). From opset 11 a negative index counts from depth; any other index outside [0, depth)
// matches nothing and gives all off (as ONNX defines it and ONNX Runtime computes it; the ONNX
// reference implementation wraps it modulo depth instead). depth must be known at import.
void Importer::convert_one_hot() {
  MF_CHECK(opset_ >= 9, InvalidArgument, describe(),
           ": OneHot exists from opset 9 on; the node is malformed");
  Value indices = input(0);
  const HostTensor depth_value = require_known(1, "depth");
  MF_CHECK(depth_value.size() == 1, InvalidArgument, describe(),
           ": depth must hold one value, got shape ", ir::shape_to_string(depth_value.type.shape));
  int64_t depth = 0;
  if (ir::is_floating(depth_value.type.dtype)) {
    const double d = depth_value.at(0);
    MF_CHECK(std::isfinite(d) && d >= 0 && d <= double(kMaxElements), InvalidArgument, describe(),
             ": depth ", d, " is not a valid number of classes");
    depth = int64_t(d);  // non-integer depths are truncated (cast to int64), as ONNX says
  } else {
    depth = depth_value.ints()[0];
    MF_CHECK(depth >= 0 && depth <= kMaxElements, InvalidArgument, describe(), ": depth ", depth,
             " is not a valid number of classes");
  }
  const int64_t n = ir::num_elements(shape_of(indices));
  MF_CHECK(depth == 0 || n <= kMaxElements / depth, InvalidArgument, describe(), ": ", n,
           " indices of depth ", depth, " make too large an output");

  // values: [off, on], known or computed.
  const std::optional<HostTensor> known_values = known(2);
  const Value values = known_values ? constant(*known_values) : input(2);
  MF_CHECK(shape_of(values) == Shape{2}, InvalidArgument, describe(),
           ": values must be [off_value, on_value] (shape (2)), got shape ",
           ir::shape_to_string(shape_of(values)));
  auto element = [&](int64_t e) {
    const Value one =
        emit("slice", {values},
             {{"begin", std::vector<int64_t>{e}}, {"end", std::vector<int64_t>{e + 1}}});
    return reshape(one, {});
  };
  const Value off = element(0), on = element(1);

  const int64_t axis = axis_attr("axis", -1, rank_of(indices) + 1);
  if (indices.type().dtype != DType::kInt64) {
    indices = emit("cast", {indices}, {{"dtype", DType::kInt64}});
  }
  if (opset_ >= 11) {
    const Value negative = emit("less", {indices, scalar(0, DType::kInt64)});
    const Value wrapped = emit("add", {indices, scalar(double(depth), DType::kInt64)});
    indices = emit("select", {negative, wrapped, indices});
  }
  Shape class_shape(size_t(rank_of(indices) + 1), 1);
  class_shape[size_t(axis)] = depth;
  const Value classes = reshape(emit("range", {}, int_range(0, depth)), class_shape);
  const Value hit = emit("equal", {emit("expand_dims", {indices}, {{"axis", axis}}), classes});
  set_output(0, emit("select", {hit, on, off}));
}

// ONNX's function body for MeanVarianceNormalization (opsets 9 and 13), term by term:
// (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9), the means over `axes` (default [0, 2, 3]).
void Importer::convert_mvn() {
  MF_CHECK(opset_ >= 9, InvalidArgument, describe(),
           ": MeanVarianceNormalization exists from opset 9 on; the node is malformed");
  Value x = input(0);
  require_float(x, "X");
  const std::vector<int64_t> axes = attr_ints("axes", {0, 2, 3});
  for (int64_t a : axes) {
    MF_CHECK(a >= -rank_of(x) && a < rank_of(x), InvalidArgument, describe(), ": axis ", a,
             " of axes is out of range for X of shape ", ir::shape_to_string(shape_of(x)),
             " (the default axes [0, 2, 3] need a 4-D X)");
  }
  const DType t = x.type().dtype;
  const ir::Attrs attrs = {{"axes", axes}, {"keep_dims", true}};
  const Value mean = emit("reduce_mean", {x}, attrs);
  const Value mean_of_squares = emit("reduce_mean", {emit("mul", {x, x})}, attrs);
  const Value variance = emit("sub", {mean_of_squares, emit("mul", {mean, mean})});
  const Value deviation = emit("add", {emit("sqrt", {variance}), scalar(1e-9, t)});
  set_output(0, emit("div", {emit("sub", {x, mean}), deviation}));
}

// A window of `size` values w(n) = sum_k a_k cos(2 pi k n / N), N = size when periodic (the
// default) and size - 1 otherwise, as ONNX defines them: Hann a = (1/2, -1/2), Hamming
// (25/46, -21/46), Blackman (0.42, -0.5, 0.08). Computed in double, stored in output_datatype.
void Importer::convert_window() {
  MF_CHECK(opset_ >= 17, InvalidArgument, describe(), ": ", echo(node_->op_type(), 40),
           " exists from opset 17 on; the node is malformed");
  const std::vector<int64_t> size = known_ints(0, "size");
  MF_CHECK(size.size() == 1 && size[0] >= 0, InvalidArgument, describe(),
           ": size must be one value >= 0");
  // The window is made at import, as a constant: bounded before it is allocated.
  if (size[0] > (int64_t{1} << 24)) {
    unsupported("a window of " + std::to_string(size[0]) + " values; at most 2^24 are made");
  }
  const int64_t n = size[0];
  const std::optional<DType> dtype = to_dtype(int32_t(attr_int("output_datatype", 1)));
  if (!dtype)
    unsupported("output_datatype " + std::to_string(attr_int("output_datatype", 1)) + "; " +
                kSupportedTypes);
  const std::string& op = node_->op_type();
  const std::vector<double> a = op == "HannWindow"      ? std::vector<double>{0.5, -0.5}
                                : op == "HammingWindow" ? std::vector<double>{25.0 / 46, -21.0 / 46}
                                                        : std::vector<double>{0.42, -0.5, 0.08};
  const double period = attr_int("periodic", 1) != 0 ? double(n) : double(n - 1);
  std::vector<double> w(size_t(n), 1.0);  // a window of one value (period 0) is 1
  if (period > 0) {
    for (int64_t i = 0; i < n; ++i) {
      double v = 0;
      for (size_t k = 0; k < a.size(); ++k) v += a[k] * std::cos(2 * M_PI * double(k) * i / period);
      w[size_t(i)] = v;
    }
  }
  set_output(0, ir::visit_dtype(*dtype, [&](auto tag) {
               using T = decltype(tag);
               return graph_->add_constant<T>({n}, std::vector<T>(w.begin(), w.end()));
             }));
}

}  // namespace mf::onnx::detail
