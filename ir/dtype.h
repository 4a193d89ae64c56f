#pragma once
// Element types of tensors. Names print as in MindSpore's IR ("Float32"), and parse back.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mf::ir {

enum class DType : uint8_t { kFloat32, kFloat64, kInt32, kInt64, kBool };

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                                       DType::kInt64, DType::kBool};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);                 // "Float32"
std::optional<DType> parse_dtype(std::string_view name);  // accepts "Float32" and "float32"
bool is_floating(DType dtype);

// The C++ type stored for a dtype (bool is stored as one byte).
template <DType D>
struct CppTypeOf;
template <>
struct CppTypeOf<DType::kFloat32> {
  using type = float;
};
template <>
struct CppTypeOf<DType::kFloat64> {
  using type = double;
};
template <>
struct CppTypeOf<DType::kInt32> {
  using type = int32_t;
};
template <>
struct CppTypeOf<DType::kInt64> {
  using type = int64_t;
};
template <>
struct CppTypeOf<DType::kBool> {
  using type = bool;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}

// Calls fn(T{}) with T the C++ type of dtype; one switch for every dtype-generic kernel.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kBool:
      return fn(bool{});
  }
  return fn(float{});
}

}  // namespace mf::ir
