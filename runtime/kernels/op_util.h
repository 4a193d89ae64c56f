#pragma once
// Small helpers every op file shares: dtype checks that name the op, inference shorthands and
// sample builders. Light on purpose (no Eigen): the op files include it next to their own heavy
// headers.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {

using ir::Attrs;
using ir::DType;
using ir::Shape;
using ir::TensorType;

inline constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64};
inline constexpr std::initializer_list<DType> kNumericTypes = {DType::kFloat32, DType::kFloat64,
                                                               DType::kInt32, DType::kInt64};
inline constexpr std::initializer_list<DType> kAllTypes = {
    DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool};

// InvalidArgument "relu does not support Bool; supported: Float32, Float64" unless dtype is listed.
inline void check_dtype(std::string_view op, DType dtype, std::initializer_list<DType> supported,
                        std::string_view what = {}) {
  for (DType d : supported) {
    if (d == dtype) return;
  }
  std::string names;
  for (DType d : supported) {
    if (!names.empty()) names += ", ";
    names += ir::dtype_name(d);
  }
  MF_FAIL(InvalidArgument, op, " does not support ", ir::dtype_name(dtype), what.empty() ? "" : " ",
          what, "; supported: ", names);
}

// All inputs in [first, inputs.size()) must share one dtype (numpy promotion is not implicit here:
// a cast is explicit in the graph, so the IR says what runs).
inline DType common_dtype(std::string_view op, std::span<const TensorType> inputs,
                          size_t first = 0) {
  const DType dtype = inputs[first].dtype;
  for (size_t i = first + 1; i < inputs.size(); ++i) {
    MF_CHECK(inputs[i].dtype == dtype, InvalidArgument, op, ": input dtypes disagree: input ",
             first, " is ", ir::dtype_name(dtype), " but input ", i, " is ",
             ir::dtype_name(inputs[i].dtype), "; insert a cast");
  }
  return dtype;
}

// Numpy broadcast of every input shape in [first, inputs.size()).
inline Shape broadcast_all(std::string_view op, std::span<const TensorType> inputs,
                           size_t first = 0) {
  Shape out = inputs[first].shape;
  for (size_t i = first + 1; i < inputs.size(); ++i) {
    out = ir::broadcast_shapes(out, inputs[i].shape, op);
  }
  return out;
}

inline int64_t rank_of(const TensorType& t) {
  return static_cast<int64_t>(t.shape.size());
}

inline TensorType tensor(DType dtype, Shape shape) {
  return TensorType{dtype, std::move(shape)};
}
inline TensorType f32(Shape shape) {
  return TensorType{DType::kFloat32, std::move(shape)};
}
inline TensorType f64(Shape shape) {
  return TensorType{DType::kFloat64, std::move(shape)};
}
inline TensorType i32(Shape shape) {
  return TensorType{DType::kInt32, std::move(shape)};
}
inline TensorType i64(Shape shape) {
  return TensorType{DType::kInt64, std::move(shape)};
}
inline TensorType boolean(Shape shape) {
  return TensorType{DType::kBool, std::move(shape)};
}

// One sample: input types, attributes and (optionally) the range inputs are drawn from.
inline ir::OpSample sample(std::vector<TensorType> inputs, Attrs attrs = {}, double low = -2.0,
                           double high = 2.0) {
  ir::OpSample s;
  s.inputs = std::move(inputs);
  s.attrs = std::move(attrs);
  s.input_low = low;
  s.input_high = high;
  return s;
}

// "[1, 2, 3]"; lists longer than 16 are cut ("[1, 2, ..., 9] (200000 values)") so errors stay
// readable.
// Rows per parallel chunk so that a chunk holds about 2^15 elements of rows `row` long.
inline int64_t grain_for(int64_t row) {
  constexpr int64_t kTarget = int64_t{1} << 15;
  return std::max<int64_t>(1, kTarget / std::max<int64_t>(1, row));
}

// Calls fn(T{}) for Float32 / Float64 only, so each kernel is instantiated twice, not five times.
template <typename Fn>
void visit_float(DType dtype, Fn&& fn) {
  if (dtype == DType::kFloat64) {
    fn(double{});
  } else {
    fn(float{});
  }
}

inline std::string ints_to_string(const std::vector<int64_t>& v) {
  constexpr size_t kShown = 16;
  const size_t shown = v.size() > kShown ? kShown - 1 : v.size();
  std::string out = "[";
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(v[i]);
  }
  if (shown < v.size()) {
    return out + ", ..., " + std::to_string(v.back()) + "] (" + std::to_string(v.size()) +
           " values)";
  }
  return out + "]";
}

}  // namespace mf::runtime::ops
