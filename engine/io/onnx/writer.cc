#include "engine/io/onnx/writer.h"

#include <fstream>

#include "base/error.h"
#include "onnx.pb.h"

namespace mf::onnx {
namespace {

void fill_tensor(TensorProto* t, const std::string& name, const Tensor& value) {
  t->set_name(name);
  t->set_data_type(static_cast<int32_t>(onnx_type_of(value.dtype())));
  for (int64_t d : value.shape()) t->add_dims(d);
  value.sync();
  t->set_raw_data(std::string(static_cast<const char*>(value.raw_data()), value.nbytes()));
}

}  // namespace

OnnxType onnx_type_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return OnnxType::kFloat;
    case DType::kFloat64:
      return OnnxType::kDouble;
    case DType::kInt32:
      return OnnxType::kInt32;
    case DType::kInt64:
      return OnnxType::kInt64;
    case DType::kBool:
      return OnnxType::kBool;
  }
  MF_FAIL(Internal, "onnx_type_of: unknown dtype");
}

struct ModelWriter::Impl {
  ModelProto model;
};

ModelWriter::ModelWriter(int64_t opset, std::string graph_name) : impl_(std::make_unique<Impl>()) {
  impl_->model.set_ir_version(8);
  impl_->model.set_producer_name("modeflow");
  OperatorSetIdProto* id = impl_->model.add_opset_import();
  id->set_domain("");
  id->set_version(opset);
  impl_->model.mutable_graph()->set_name(std::move(graph_name));
}

ModelWriter::~ModelWriter() = default;

void ModelWriter::add_input(const std::string& name, DType dtype, const Shape& shape,
                            const std::vector<std::string>& dim_params) {
  ValueInfoProto* in = impl_->model.mutable_graph()->add_input();
  in->set_name(name);
  TypeProto::Tensor* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(onnx_type_of(dtype)));
  TensorShapeProto* s = tt->mutable_shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    TensorShapeProto::Dimension* dim = s->add_dim();
    if (d < dim_params.size() && dim_params[d] == "?") {
      continue;  // neither value nor name: an unnamed dynamic dimension
    }
    if (d < dim_params.size() && !dim_params[d].empty()) {
      dim->set_dim_param(dim_params[d]);
    } else {
      dim->set_dim_value(shape[d]);
    }
  }
}

void ModelWriter::add_initializer(const std::string& name, const Tensor& value) {
  fill_tensor(impl_->model.mutable_graph()->add_initializer(), name, value);
}

void ModelWriter::add_raw_initializer(const std::string& name, int32_t onnx_type,
                                      const std::vector<int64_t>& dims,
                                      const std::string& raw_data) {
  TensorProto* t = impl_->model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(raw_data);
}

void ModelWriter::add_external_initializer(
    const std::string& name, int32_t onnx_type, const std::vector<int64_t>& dims,
    const std::vector<std::pair<std::string, std::string>>& external_data) {
  TensorProto* t = impl_->model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_data_location(TensorProto::EXTERNAL);
  for (const auto& [key, value] : external_data) {
    StringStringEntryProto* e = t->add_external_data();
    e->set_key(key);
    e->set_value(value);
  }
}

void ModelWriter::add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs,
                           const std::vector<NodeAttr>& attrs, const std::string& name,
                           const std::string& domain) {
  NodeProto* node = impl_->model.mutable_graph()->add_node();
  node->set_op_type(op_type);
  node->set_name(name);
  node->set_domain(domain);
  for (const auto& in : inputs) node->add_input(in);
  for (const auto& out : outputs) node->add_output(out);
  for (const NodeAttr& attr : attrs) {
    AttributeProto* a = node->add_attribute();
    a->set_name(attr.name);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, int64_t>) {
            a->set_type(AttributeProto::INT);
            a->set_i(v);
          } else if constexpr (std::is_same_v<V, double>) {
            a->set_type(AttributeProto::FLOAT);
            a->set_f(static_cast<float>(v));
          } else if constexpr (std::is_same_v<V, std::string>) {
            a->set_type(AttributeProto::STRING);
            a->set_s(v);
          } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
            a->set_type(AttributeProto::INTS);
            for (int64_t x : v) a->add_ints(x);
          } else if constexpr (std::is_same_v<V, std::vector<double>>) {
            a->set_type(AttributeProto::FLOATS);
            for (double x : v) a->add_floats(static_cast<float>(x));
          } else {
            a->set_type(AttributeProto::TENSOR);
            fill_tensor(a->mutable_t(), "", v);
          }
        },
        attr.value);
  }
}

void ModelWriter::add_output(const std::string& name) {
  impl_->model.mutable_graph()->add_output()->set_name(name);
}

std::string ModelWriter::serialize() const {
  return impl_->model.SerializeAsString();
}

void ModelWriter::save(const std::filesystem::path& file) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  MF_CHECK(out.good(), InvalidArgument, "cannot write '", echo(file.string()), "'");
  const std::string bytes = serialize();
  out.write(bytes.data(), std::streamsize(bytes.size()));
  MF_CHECK(out.good(), InvalidArgument, "writing '", file.string(), "' failed");
}

}  // namespace mf::onnx
