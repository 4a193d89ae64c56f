// ONNX import: ops on shapes and layouts (Reshape, Slice, Gather, Concat, Shape, ...).

#include "engine/io/onnx/importer_impl.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

namespace {
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
}  // namespace

void Importer::add_shape_converters(ConverterTable& table) {
  add_converters(table, {
                            {"Concat", &Importer::convert_concat},
                            {"Expand", &Importer::convert_expand},
                            {"Flatten", &Importer::convert_flatten},
                            {"Gather", &Importer::convert_gather},
                            {"Reshape", &Importer::convert_reshape},
                            {"Shape", &Importer::convert_shape},
                            {"Size", &Importer::convert_size},
                            {"Slice", &Importer::convert_slice},
                            {"Split", &Importer::convert_split},
                            {"Squeeze", &Importer::convert_squeeze},
                            {"Transpose", &Importer::convert_transpose},
                            {"Unsqueeze", &Importer::convert_unsqueeze},
                        });
}

void Importer::convert_flatten() {
  Value x = input(0);
  const Shape& s = shape_of(x);
  int64_t axis = attr_int("axis", 1);  // in [-rank, rank]
  if (axis < 0) axis += rank_of(x);
  MF_CHECK(axis >= 0 && axis <= rank_of(x), InvalidArgument, describe(), ": axis ",
           attr_int("axis", 1), " is out of range for rank ", rank_of(x));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank_of(x); ++d) (d < axis ? outer : inner) *= s[d];
  set_output(0, reshape(x, {outer, inner}));
}

void Importer::convert_reshape() {
  Value x = input(0);
  std::vector<int64_t> shape = known_ints(1, "shape");
  const bool allow_zero = attr_int("allowzero", 0) != 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allow_zero) {
      MF_CHECK(d < shape_of(x).size(), InvalidArgument, describe(), ": shape ",
               ir::shape_to_string(shape), " copies axis ", d, " (0), which x ",
               ir::shape_to_string(shape_of(x)), " does not have");
      shape[d] = shape_of(x)[d];
    }
  }
  if (shape == shape_of(x)) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("reshape", {x}, {{"shape", shape}}));
}

void Importer::convert_transpose() {
  Value x = input(0);
  std::vector<int64_t> perm(rank_of(x));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = attr_ints("perm", perm);
  set_output(0, emit("transpose", {x}, {{"perm", perm}}));
}

void Importer::convert_concat() {
  MF_CHECK(has_attr("axis"), InvalidArgument, describe(), " has no axis attribute");
  std::vector<Value> xs;
  for (size_t i = 0; i < num_inputs(); ++i) xs.push_back(input(i));
  set_output(0, emit("concat", xs, {{"axis", attr_int("axis", 0)}}));
}

// The sizes are an attribute before opset 13 and an optional input from 13; opset 18 may give
// num_outputs instead, whose parts are ceil(dim / n) long with a shorter last one.
void Importer::convert_split() {
  Value x = input(0);
  const size_t parts = size_t(node_->output_size());
  MF_CHECK(parts >= 1, InvalidArgument, describe(), " has no outputs");
  std::vector<int64_t> sizes;
  if (opset_ >= 13) {
    MF_CHECK(!has_attr("split"), InvalidArgument, describe(),
             ": from opset 13 split is input 1, not an attribute; the node is malformed");
    if (has_input(1)) sizes = known_ints(1, "split");
  } else {
    sizes = attr_ints("split", {});
  }
  ir::Attrs attrs = {{"axis", attr_int("axis", 0)}};
  if (opset_ >= 18 && has_attr("num_outputs")) {
    const int64_t n = attr_int("num_outputs", 0);
    MF_CHECK(sizes.empty(), InvalidArgument, describe(),
             " gives both the split input and num_outputs; ONNX allows one of them");
    MF_CHECK(n == int64_t(parts), InvalidArgument, describe(), ": num_outputs is ", n,
             " but the node has ", parts, " outputs");
    const int64_t dim = shape_of(x)[axis_attr("axis", 0, rank_of(x))];
    if (dim % n != 0) {
      const int64_t chunk = dim / n + 1;
      MF_CHECK(chunk * (n - 1) <= dim, InvalidArgument, describe(), ": an axis of size ", dim,
               " cannot be split into ", n, " parts of ", chunk, " and a shorter last one");
      sizes.assign(size_t(n - 1), chunk);
      sizes.push_back(dim - chunk * (n - 1));
    }
  }
  if (sizes.empty()) {
    attrs["num"] = int64_t(parts);
  } else {
    MF_CHECK(sizes.size() == parts, InvalidArgument, describe(), ": split ",
             ir::shape_to_string(sizes), " lists ", sizes.size(), " sizes for ", parts, " outputs");
    attrs["sections"] = sizes;
  }
  const std::vector<Value> outs = emit_all("split", {x}, attrs);
  for (size_t k = 0; k < outs.size(); ++k) set_output(k, outs[k]);
}

// Before opset 10 starts, ends and axes are attributes and there are no steps; from 10 they are
// inputs, with steps.
void Importer::convert_slice() {
  Value x = input(0);
  const int64_t rank = rank_of(x);
  std::vector<int64_t> starts, ends, axes, steps;
  const auto leading_axes = [](size_t n) {
    std::vector<int64_t> a(n);
    std::iota(a.begin(), a.end(), 0);
    return a;
  };
  if (opset_ >= 10) {
    starts = known_ints(1, "starts");
    ends = known_ints(2, "ends");
    axes = has_input(3) ? known_ints(3, "axes") : leading_axes(starts.size());
    steps = has_input(4) ? known_ints(4, "steps") : std::vector<int64_t>(starts.size(), 1);
  } else {
    MF_CHECK(has_attr("starts") && has_attr("ends"), InvalidArgument, describe(),
             " needs the attributes starts and ends (before opset 10 they are not inputs)");
    starts = attr_ints("starts", {});
    ends = attr_ints("ends", {});
    axes = attr_ints("axes", leading_axes(starts.size()));
    steps.assign(starts.size(), 1);
  }
  MF_CHECK(
      ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
      InvalidArgument, describe(), ": starts, ends, axes and steps must have one length");
  std::vector<int64_t> begin(rank, 0), end(rank, kInt64Max), stride(rank, 1);
  std::vector<bool> seen(rank, false);
  struct Reversed {
    int64_t axis, start, end, step;
  };
  std::vector<Reversed> reversed;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    MF_CHECK(axis >= 0 && axis < rank && !seen[axis], InvalidArgument, describe(), ": axis ",
             axes[i], " is out of range or repeated for rank ", rank);
    seen[axis] = true;
    MF_CHECK(steps[i] != 0 && steps[i] > INT64_MIN, InvalidArgument, describe(),
             ": steps must not be 0 (or -2^63)");
    if (steps[i] < 0) {
      reversed.push_back({axis, starts[i], ends[i], steps[i]});
      continue;
    }
    begin[axis] = starts[i];
    end[axis] = ends[i];
    stride[axis] = steps[i];
  }
  Value y = emit("slice", {x}, {{"begin", begin}, {"end", end}, {"strides", stride}});
  // A negative step walks the axis backwards: the positions it visits, computed here as ONNX
  // clamps them (start into [0, dim - 1], end into [-1, dim - 1]), picked by a gather.
  for (const Reversed& r : reversed) {
    const int64_t dim = shape_of(y)[size_t(r.axis)];
    const auto from_end = [dim](int64_t v) { return v < 0 ? (v < -dim ? -1 : v + dim) : v; };
    const int64_t first = std::min(from_end(r.start), dim - 1);
    const int64_t stop = std::min(from_end(r.end), dim - 1);
    if (first > stop && (first - stop) / -r.step > (int64_t{1} << 24)) {
      unsupported("a reversing slice of more than 2^24 positions");
    }
    std::vector<int64_t> picked;
    for (int64_t p = first; p > stop && p >= 0; p += r.step) {
      picked.push_back(p);
      if (p < -r.step) break;  // the next step would pass below 0
    }
    const int64_t n = int64_t(picked.size());
    y = emit("gather", {y, graph_->add_constant<int64_t>({n}, std::move(picked))},
             {{"axis", r.axis}});
  }
  set_output(0, y);
}

void Importer::convert_squeeze() {
  Value x = input(0);
  std::vector<int64_t> axes;
  // An attribute before opset 13, an optional input from 13; none squeezes every 1.
  if (opset_ >= 13) {
    MF_CHECK(!has_attr("axes"), InvalidArgument, describe(),
             ": from opset 13 axes is input 1, not an attribute; the node is malformed");
    if (has_input(1)) axes = known_ints(1, "axes");
  } else {
    axes = attr_ints("axes", {});
  }
  set_output(0, emit("squeeze", {x}, {{"axes", axes}}));
}

void Importer::convert_unsqueeze() {
  Value x = input(0);
  // A required attribute before opset 13, a required input from 13.
  std::vector<int64_t> axes;
  if (opset_ >= 13) {
    MF_CHECK(!has_attr("axes"), InvalidArgument, describe(),
             ": from opset 13 axes is input 1, not an attribute; the node is malformed");
    axes = known_ints(1, "axes");
  } else {
    MF_CHECK(has_attr("axes"), InvalidArgument, describe(),
             " has no axes attribute (an input only from opset 13); the node is malformed");
    axes = attr_ints("axes", {});
  }
  const int64_t out_rank = rank_of(x) + int64_t(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    const int64_t axis = a < 0 ? a + out_rank : a;
    MF_CHECK(axis >= 0 && axis < out_rank && !inserted[axis], InvalidArgument, describe(),
             ": axes ", ir::shape_to_string(axes), " are out of range or repeated for rank ",
             out_rank);
    inserted[axis] = true;
  }
  Shape shape;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) shape.push_back(inserted[d] ? 1 : shape_of(x)[next++]);
  set_output(0, reshape(x, shape));
}

void Importer::convert_gather() {
  Value x = input(0);
  Value indices = input(1);
  set_output(0, emit("gather", {x, indices}, {{"axis", attr_int("axis", 0)}}));
}

void Importer::convert_shape() {
  const Shape& s = shape_of(input(0));
  const int64_t rank = int64_t(s.size());
  int64_t start = attr_int("start", 0), end = attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  const std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
  set_output(0, graph_->add_constant<int64_t>({int64_t(dims.size())}, dims));
}

void Importer::convert_size() {
  set_output(0, graph_->add_constant<int64_t>({}, {ir::num_elements(shape_of(input(0)))}));
}

void Importer::convert_expand() {
  Value x = input(0);
  const std::vector<int64_t> shape = known_ints(1, "shape");
  for (int64_t d : shape) {
    MF_CHECK(d >= 0, InvalidArgument, describe(), ": shape ", ir::shape_to_string(shape),
             " has a negative dimension");
  }
  // Expand broadcasts both ways: a 1 in `shape` keeps x's dimension.
  const Shape out = ir::broadcast_shapes(shape_of(x), shape, "Expand");
  if (out == shape_of(x)) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("broadcast_to", {x}, {{"shape", out}}));
}

}  // namespace mf::onnx::detail
