#pragma once
// Typed node attributes. Attrs is an ordered map so printing, hashing and comparing are canonical.

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace mf::ir {

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, DType>;

enum class AttrKind : uint8_t { kBool, kInt, kFloat, kString, kInts, kFloats, kDType };

using Attrs = std::map<std::string, AttrValue, std::less<>>;

AttrKind attr_kind(const AttrValue& value);
std::string_view attr_kind_name(
    AttrKind kind);  // "bool", "int", "float", "str", "ints", "floats", "dtype"

// Typed access with clear errors ("attribute 'axis' of op 'softmax' is missing / is str, expected
// int").
int64_t attr_int(const Attrs& attrs, std::string_view name, std::string_view op_name);
double attr_float(const Attrs& attrs, std::string_view name, std::string_view op_name);
bool attr_bool(const Attrs& attrs, std::string_view name, std::string_view op_name);
const std::string& attr_string(const Attrs& attrs, std::string_view name, std::string_view op_name);
const std::vector<int64_t>& attr_ints(const Attrs& attrs, std::string_view name,
                                      std::string_view op_name);
DType attr_dtype(const Attrs& attrs, std::string_view name, std::string_view op_name);

}  // namespace mf::ir
