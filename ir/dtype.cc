#include "ir/dtype.h"

#include <cctype>
#include <string>

namespace mf::ir {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "Float32";
    case DType::kFloat64:
      return "Float64";
    case DType::kInt32:
      return "Int32";
    case DType::kInt64:
      return "Int64";
    case DType::kBool:
      return "Bool";
  }
  return "Unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  // Case-insensitive on the first letter only: "Float32" (MindSpore dumps) and "float32" (numpy
  // users).
  for (DType dtype : kAllDTypes) {
    std::string_view canonical = dtype_name(dtype);
    if (name.size() != canonical.size() || name.empty()) continue;
    if (std::tolower(static_cast<unsigned char>(name[0])) !=
        std::tolower(static_cast<unsigned char>(canonical[0])))
      continue;
    if (name.substr(1) == canonical.substr(1)) return dtype;
  }
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

}  // namespace mf::ir
