// TensorProto decoding (see tensor_proto.h).

#include "engine/io/onnx/tensor_proto.h"

#include "base/error.h"
#include "onnx.pb.h"

namespace mf::onnx::detail {

using ir::DType;

std::optional<DType> to_dtype(int32_t onnx_type) {
  switch (onnx_type) {
    case TensorProto::FLOAT:
      return DType::kFloat32;
    case TensorProto::DOUBLE:
      return DType::kFloat64;
    case TensorProto::INT32:
      return DType::kInt32;
    case TensorProto::INT64:
      return DType::kInt64;
    case TensorProto::BOOL:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t onnx_type) {
  const std::string& name = TensorProto::DataType_Name(onnx_type);
  return name.empty() ? "type #" + std::to_string(onnx_type) : name;
}

std::string quoted_name(const std::string& name) {
  return name.empty() ? std::string("(unnamed)") : "'" + echo(name, 80) + "'";
}

// Decodes a TensorProto into row-major little-endian bytes, checking every size against the data.
ir::TensorType tensor_proto_type(const TensorProto& t, std::string_view what) {
  const std::string name = quoted_name(t.name());
  const std::optional<DType> dtype = to_dtype(t.data_type());
  MF_CHECK(dtype.has_value(), Unsupported, what, " ", name, " has element type ",
           onnx_type_name(t.data_type()), "; ", kSupportedTypes);
  ir::TensorType type;
  type.dtype = *dtype;
  MF_CHECK(t.dims_size() <= ir::kMaxRank, DataLoss, what, " ", name, " has rank ", t.dims_size(),
           "; at most ", ir::kMaxRank, " axes are supported: the file is damaged");
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    MF_CHECK(d >= 0, DataLoss, what, " ", name, " has a negative dimension ", d,
             "; the file is damaged: re-export it");
    MF_CHECK(d == 0 || n <= kMaxElements / d, DataLoss, what, " ", name,
             " claims more than 2^40 elements; the file is damaged: re-export it");
    n *= d;
    type.shape.push_back(d);
  }
  return type;
}

HostTensor decode_tensor(const TensorProto& t, std::string_view what) {
  const std::string name = quoted_name(t.name());
  MF_CHECK(t.data_location() != TensorProto::EXTERNAL, Unsupported, what, " ", name,
           " keeps its data in an external file, which the importer does not read; re-save the "
           "model with its data inline (onnx.save_model(model, path, "
           "save_as_external_data=False))");
  HostTensor h;
  h.type = tensor_proto_type(t, what);
  const std::optional<DType> dtype = h.type.dtype;
  const int64_t n = ir::num_elements(h.type.shape);
  const size_t elem = ir::dtype_size(*dtype);
  const auto wrong_count = [&](int64_t got, const char* field) {
    MF_FAIL(DataLoss, what, " ", name, " has shape ", ir::shape_to_string(h.type.shape), " (", n,
            " elements) but its ", field, " holds ", got,
            "; the file is damaged or truncated: re-export it");
  };
  if (!t.raw_data().empty()) {
    if (t.raw_data().size() != size_t(n) * elem) {
      wrong_count(int64_t(t.raw_data().size()), "raw_data (bytes)");
    }
    h.bytes.assign(t.raw_data().begin(), t.raw_data().end());
    if (*dtype == DType::kBool) {
      for (uint8_t& b : h.bytes) b = b != 0;
    }
    return h;
  }
  h.bytes.resize(size_t(n) * elem);
  auto copy = [&](const auto& field, const char* field_name, auto convert) {
    if (field.size() != n) wrong_count(field.size(), field_name);
    for (int64_t i = 0; i < n; ++i) {
      auto v = convert(field.Get(int(i)));
      std::memcpy(h.bytes.data() + i * elem, &v, elem);
    }
  };
  switch (*dtype) {
    case DType::kFloat32:
      copy(t.float_data(), "float_data", [](float v) { return v; });
      break;
    case DType::kFloat64:
      copy(t.double_data(), "double_data", [](double v) { return v; });
      break;
    case DType::kInt32:
      copy(t.int32_data(), "int32_data", [](int32_t v) { return v; });
      break;
    case DType::kInt64:
      copy(t.int64_data(), "int64_data", [](int64_t v) { return v; });
      break;
    case DType::kBool:
      copy(t.int32_data(), "int32_data", [](int32_t v) { return uint8_t(v != 0); });
      break;
  }
  return h;
}

Tensor to_tensor(const HostTensor& h) {
  return Tensor::from_bytes(h.type.dtype, h.type.shape, h.bytes.data());
}

}  // namespace mf::onnx::detail
