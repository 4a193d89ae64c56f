#pragma once
// Static tensor shapes and the numpy broadcasting rule, and the one checked shape arithmetic every
// loader, inference and allocator uses: no shape product in the engine wraps around 64 bits.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mf::ir {

using Shape = std::vector<int64_t>;

// The largest tensor the engine accepts: 2^40 elements (so at most 2^43 bytes for the widest
// dtype). Inferred shapes, loaded files (.npy, ONNX, print files, IR constants) and allocations
// beyond it are rejected with InvalidArgument or DataLoss before any kernel or allocation runs.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 43;
// The largest rank accepted anywhere (a rank-200,000 shape is hostile input, not a tensor).
inline constexpr int64_t kMaxRank = 64;

// a * b and a + b, or nullopt when the result does not fit int64.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
std::optional<int64_t> checked_add(int64_t a, int64_t b);

// The element count: 1 for a scalar shape (). Throws InvalidArgument when a dimension is negative
// or the product overflows int64 (it never wraps).
int64_t num_elements(const Shape& shape);
// The element count, or nullopt when a dimension is negative, the rank exceeds kMaxRank or the
// count exceeds kMaxTensorElements, zero dimensions counted as 1 (so that the strides of an empty
// tensor fit as well).
std::optional<int64_t> try_num_elements(const Shape& shape);
// The element count; InvalidArgument "<what>: shape (...) ..." saying which rule is broken when
// try_num_elements would give nullopt.
int64_t checked_num_elements(const Shape& shape, std::string_view what);
// checked_num_elements(shape) * element_size, in bytes.
int64_t checked_byte_size(const Shape& shape, size_t element_size, std::string_view what);

// "(64, 784)", "()" for a scalar. Shapes of more than 16 axes are cut:
// "(1, 1, 1, 1, 1, 1, 1, 1, ..., 1) [rank 200000]", so errors stay readable.
std::string shape_to_string(const Shape& shape);
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Numpy broadcasting; throws InvalidArgument naming op, both shapes and the axis that disagrees.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op_name);

// Normalizes a possibly negative axis against rank; throws InvalidArgument naming the op when out
// of range.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op_name);

}  // namespace mf::ir
