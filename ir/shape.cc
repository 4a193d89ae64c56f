#include "ir/shape.h"

#include "base/error.h"

namespace mf::ir {

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) {
      MF_FAIL(InvalidArgument, "shape ", shape_to_string(shape), " has a negative dimension ", d);
    }
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  if (overflow) {
    // A zero dimension makes the true product 0 even if a partial product overflowed.
    for (int64_t d : shape) {
      if (d == 0) return 0;
    }
    MF_FAIL(InvalidArgument, "shape ", shape_to_string(shape),
            " has more elements than fit in 64 bits");
  }
  return n;
}

std::optional<int64_t> try_num_elements(const Shape& shape) {
  if (static_cast<int64_t>(shape.size()) > kMaxRank) return std::nullopt;
  // Zero dimensions count as 1 in the bound: a tensor with no elements but axes of 2^40 and 2^30
  // would still overflow its strides (contiguous_strides, every kernel's index math). Every axis is
  // checked, also after a zero.
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (d > kMaxTensorElements || n > kMaxTensorElements / d) return std::nullopt;
    n *= d;
  }
  return empty ? 0 : n;
}

int64_t checked_num_elements(const Shape& shape, std::string_view what) {
  if (auto n = try_num_elements(shape)) return *n;
  MF_CHECK(static_cast<int64_t>(shape.size()) <= kMaxRank, InvalidArgument, what, ": shape ",
           shape_to_string(shape), " has rank ", shape.size(), "; at most ", kMaxRank,
           " axes are supported");
  for (size_t i = 0; i < shape.size(); ++i) {
    MF_CHECK(shape[i] >= 0, InvalidArgument, what, ": shape ", shape_to_string(shape),
             " has a negative dimension ", shape[i], " at axis ", i);
  }
  MF_FAIL(InvalidArgument, what, ": shape ", shape_to_string(shape), " has more than 2^40 (",
          kMaxTensorElements,
          ") elements, the largest tensor supported (zero dimensions count as 1 in this bound)");
}

int64_t checked_byte_size(const Shape& shape, size_t element_size, std::string_view what) {
  // kMaxTensorElements * 8 cannot overflow; wider element sizes do not exist.
  return checked_num_elements(shape, what) * static_cast<int64_t>(element_size);
}

std::string shape_to_string(const Shape& shape) {
  constexpr size_t kShown = 16;
  std::string out = "(";
  const size_t shown = shape.size() > kShown ? kShown - 1 : shape.size();
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shown < shape.size()) {
    out +=
        ", ..., " + std::to_string(shape.back()) + ") [rank " + std::to_string(shape.size()) + "]";
    return out;
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
