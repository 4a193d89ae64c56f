#pragma once
// Static tensor shapes and the numpy broadcasting rule.

#include <cstdint>
#include <string>
#include <vector>

namespace mf::ir {

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);         // 1 for a scalar shape ()
std::string shape_to_string(const Shape& shape);  // "(64, 784)", "()" for a scalar
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Numpy broadcasting; throws InvalidArgument naming op, both shapes and the axis that disagrees.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op_name);

// Normalizes a possibly negative axis against rank; throws InvalidArgument naming the op when out
// of range.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op_name);

}  // namespace mf::ir
