// ONNX import: Constant and ConstantOfShape.

#include "engine/io/onnx/importer_impl.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_constant_converters(ConverterTable& table) {
  add_converters(table, {
                            {"Constant", &Importer::convert_constant},
                            {"ConstantOfShape", &Importer::convert_constant_of_shape},
                        });
}

void Importer::convert_constant() {
  MF_CHECK(node_->attribute_size() == 1, InvalidArgument, describe(),
           " must have exactly one value attribute, has ", node_->attribute_size());
  const AttributeProto& a = node_->attribute(0);
  const std::string& name = a.name();
  if (name == "value") {
    check_attr(a, AttributeProto::TENSOR);
    set_output(0, constant(decode_tensor(a.t(), "Constant value")));
  } else if (name == "value_float") {
    set_output(0, scalar(attr_float(name, 0), DType::kFloat32));
  } else if (name == "value_int") {
    set_output(0, graph_->add_constant<int64_t>({}, {attr_int(name, 0)}));
  } else if (name == "value_floats") {
    check_attr(a, AttributeProto::FLOATS);
    const std::vector<float> v(a.floats().begin(), a.floats().end());
    set_output(0, graph_->add_constant<float>({int64_t(v.size())}, v));
  } else if (name == "value_ints") {
    const std::vector<int64_t> v = attr_ints(name, {});
    set_output(0, graph_->add_constant<int64_t>({int64_t(v.size())}, v));
  } else {
    unsupported("a Constant given by '" + echo(name, 40) +
                "' is not supported (strings and sparse tensors); use 'value'");
  }
}

void Importer::convert_constant_of_shape() {
  const std::vector<int64_t> shape = known_ints(0, "shape");
  int64_t n = 1;
  for (int64_t d : shape) {
    MF_CHECK(d >= 0 && (d == 0 || n <= kMaxElements / d), InvalidArgument, describe(), ": shape ",
             ir::shape_to_string(shape), " is negative or too large");
    n *= d;
  }
  HostTensor value{{DType::kFloat32, {}}, std::vector<uint8_t>(4, 0)};
  if (const AttributeProto* a = find_attr("value")) {
    check_attr(*a, AttributeProto::TENSOR);
    value = decode_tensor(a->t(), "ConstantOfShape value");
    MF_CHECK(value.size() == 1, InvalidArgument, describe(), ": value must hold one element");
  }
  value.type.shape = {};
  set_output(0, emit("broadcast_to", {constant(value)}, {{"shape", shape}}));
}

}  // namespace mf::onnx::detail
