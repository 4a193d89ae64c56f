#include "ir/attribute.h"

#include "base/error.h"

namespace mf::ir {

AttrKind attr_kind(const AttrValue& value) {
  return static_cast<AttrKind>(value.index());
}

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "str";
    case AttrKind::kInts:
      return "ints";
    case AttrKind::kFloats:
      return "floats";
    case AttrKind::kDType:
      return "dtype";
  }
  return "unknown";
}

namespace {

// The variant's alternatives are listed in AttrKind order, so the index is the kind.
template <typename T, AttrKind Kind>
const T& get_attr(const Attrs& attrs, std::string_view name, std::string_view op_name) {
  auto it = attrs.find(name);
  MF_CHECK(it != attrs.end(), InvalidArgument, "attribute '", name, "' of op '", op_name,
           "' is missing");
  const T* value = std::get_if<T>(&it->second);
  MF_CHECK(value != nullptr, InvalidArgument, "attribute '", name, "' of op '", op_name, "' is ",
           attr_kind_name(attr_kind(it->second)), ", expected ", attr_kind_name(Kind));
  return *value;
}

}  // namespace

int64_t attr_int(const Attrs& attrs, std::string_view name, std::string_view op_name) {
  return get_attr<int64_t, AttrKind::kInt>(attrs, name, op_name);
}

double attr_float(const Attrs& attrs, std::string_view name, std::string_view op_name) {
  // An int where a float is expected is a lossless widening users write naturally ("alpha: 1").
  auto it = attrs.find(name);
  if (it != attrs.end()) {
    if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  }
  return get_attr<double, AttrKind::kFloat>(attrs, name, op_name);
}

bool attr_bool(const Attrs& attrs, std::string_view name, std::string_view op_name) {
  return get_attr<bool, AttrKind::kBool>(attrs, name, op_name);
}

const std::string& attr_string(const Attrs& attrs, std::string_view name,
                               std::string_view op_name) {
  return get_attr<std::string, AttrKind::kString>(attrs, name, op_name);
}

const std::vector<int64_t>& attr_ints(const Attrs& attrs, std::string_view name,
                                      std::string_view op_name) {
  return get_attr<std::vector<int64_t>, AttrKind::kInts>(attrs, name, op_name);
}

DType attr_dtype(const Attrs& attrs, std::string_view name, std::string_view op_name) {
  return get_attr<DType, AttrKind::kDType>(attrs, name, op_name);
}

}  // namespace mf::ir
