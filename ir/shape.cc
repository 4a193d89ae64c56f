#include "ir/shape.h"

#include "base/error.h"

namespace mf::ir {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += ")";
  return out;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op_name) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  // Align from the trailing axis, as numpy does; axes are reported in the output's numbering.
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    MF_CHECK(da == db || da == 1 || db == 1, InvalidArgument, "op '", op_name, "': shapes ",
             shape_to_string(a), " and ", shape_to_string(b), " cannot be broadcast: axis ", i,
             " of the result has sizes ", da, " and ", db,
             " (numpy rule: trailing axes must be equal or 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op_name) {
  MF_CHECK(axis >= -rank && axis < rank, InvalidArgument, "op '", op_name, "': axis ", axis,
           " is out of range for rank ", rank, " (expected ", -rank, " <= axis < ", rank, ")");
  return axis < 0 ? axis + rank : axis;
}

}  // namespace mf::ir
